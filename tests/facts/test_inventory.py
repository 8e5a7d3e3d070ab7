"""The report's inventory on the real Debian tree: computed once from the run's own unit index,
valid against the published schema, and each field checked against what the image holds."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import jsonschema
import pytest

from imagelint.config import Config
from imagelint.engine import RunSettings, audit
from imagelint.facts.systemd import UnitIndex
from imagelint.rulepacks import builtin_pack_paths, load_packs
from imagelint.targets import RootfsTarget
from tests.support import copy_rootfs, run_cli

PLANTED = """\
[Unit]
Description=a vendor agent that restarts forever
StartLimitIntervalSec=0

[Service]
ExecStart=/usr/bin/vendor-agent
ExecStartPre=-/usr/bin/true
Restart=always
RestartSec=0

[Install]
WantedBy=multi-user.target
"""


@pytest.fixture(scope="module")
def image(debian_rootfs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_rootfs(debian_rootfs, tmp_path_factory.mktemp("inv") / "rootfs")
    etc = root / "etc/systemd/system"
    (etc / "vendor.service").write_text(PLANTED)
    (etc / "multi-user.target.wants/vendor.service").symlink_to("/etc/systemd/system/vendor.service")
    (etc / "ssh.service.d").mkdir()
    (etc / "ssh.service.d/50-image.conf").write_text("[Service]\nRestartSec=5s\n")
    return root


@pytest.fixture(scope="module")
def report(image: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("out") / "report.json"
    proc = run_cli("audit", str(image), "-f", f"json:{out}")
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(out.read_text())
    schema = json.loads(run_cli("schema", "report").stdout)
    jsonschema.validate(data, schema)
    return data


def test_units_carry_state_preset_chain_restart_execs_and_dropin_hashes(image: Path, report: dict) -> None:
    inventory = report["inventory"]
    assert inventory["complete"] and inventory["default_target"] == "graphical.target"
    vendor = inventory["units"]["vendor.service"]
    assert vendor["state"] == "enabled" and vendor["boot_chain"][-2:] == [
        "multi-user.target",
        "vendor.service",
    ]
    assert vendor["restart"]["limit_can_trip"] is False
    assert "StartLimitIntervalSec=0" in vendor["restart"]["why"]
    assert vendor["execs"] == [
        {"key": "ExecStartPre", "path": "/usr/bin/true", "exists": True},
        {"key": "ExecStart", "path": "/usr/bin/vendor-agent", "exists": False},
    ]
    ssh = inventory["units"]["ssh.service"]
    dropin = image / "etc/systemd/system/ssh.service.d/50-image.conf"
    assert ssh["dropins"] == [
        {
            "path": "/etc/systemd/system/ssh.service.d/50-image.conf",
            "sha256": hashlib.sha256(dropin.read_bytes()).hexdigest(),
        }
    ]
    # RestartSec=5s from the drop-in: 5 restarts take 25 s, past the 10 s window: it can never trip
    assert ssh["restart"]["restart_sec"] == 5.0 and ssh["restart"]["limit_can_trip"] is False
    assert "not less than the 10s interval" in ssh["restart"]["why"]
    assert inventory["units"]["cron.service"]["restart"]["limit_can_trip"] is True
    assert ssh["aliases"] == ["sshd.service"] and "sshd.service" not in inventory["units"]
    apt = inventory["units"]["apt-daily.service"]
    assert apt["boot_chain"] is not None and apt["boot_chain"][-2:] == [
        "apt-daily.timer",
        "apt-daily.service",
    ]
    assert {"by": "apt-daily.timer", "type": "timer", "at_boot": True} in apt["activated_by"]
    assert inventory["units"]["ssh.socket"]["state"] == "disabled"
    assert {"by": "ssh.socket", "type": "socket", "at_boot": False} in ssh["activated_by"]


def test_every_unit_file_of_systemctl_is_in_the_inventory(image: Path, report: dict) -> None:
    """The names systemctl --root lists (aliases aside) are the inventory's, with the same states."""
    import subprocess

    proc = subprocess.run(
        ["systemctl", f"--root={image}", "list-unit-files", "--no-legend", "--no-pager"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    listed = {p[0]: p[1] for p in (line.split() for line in proc.stdout.splitlines())}
    units = report["inventory"]["units"]
    assert {n: s for n, s in listed.items() if s != "alias"} == {
        n: u["state"] for n, u in units.items() if n in listed
    }


def test_image_facts_and_packages(report: dict) -> None:
    inventory = report["inventory"]
    assert inventory["os_release"]["VERSION_CODENAME"] == "bookworm"
    assert inventory["packages"]["manager"] == "dpkg" and inventory["packages"]["count"] > 100
    assert inventory["packages"]["items"]["systemd"].startswith("252")


def test_the_inventory_reuses_the_runs_unit_index(image: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = UnitIndex.build.__func__

    def counting(cls, target):
        calls.append(target)
        return real(cls, target)

    monkeypatch.setattr(UnitIndex, "build", classmethod(counting))
    packs = load_packs([], builtin=builtin_pack_paths())
    report = audit(RootfsTarget(image), packs, Config(), RunSettings())
    assert report.inventory is not None and "vendor.service" in report.inventory["units"]
    assert len(calls) == 1
    # and with no systemd rule selected at all, it is built once for the inventory
    calls.clear()
    report = audit(RootfsTarget(image), packs, Config(select=["IL107"]), RunSettings())
    assert len(calls) == 1 and report.inventory["units"]


def test_each_units_executables_are_resolved_once_for_the_rules_and_the_inventory(
    image: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from imagelint.facts.systemd import execs

    resolved: list[str] = []
    real = execs.unit_commands

    def counting(target, unit):
        resolved.append(unit.name)
        return real(target, unit)

    monkeypatch.setattr(execs, "unit_commands", counting)
    packs = load_packs([], builtin=builtin_pack_paths())
    report = audit(RootfsTarget(image), packs, Config(), RunSettings())
    assert report.inventory["units"]["vendor.service"]["execs"]
    assert "vendor.service" in resolved  # the rules (IL2xx boot units) and the inventory both read it
    assert len(resolved) == len(set(resolved)), sorted(n for n in set(resolved) if resolved.count(n) > 1)


def test_the_inventory_is_reproducible(image: Path, tmp_path: Path) -> None:
    outs = []
    for i in range(2):
        out = tmp_path / f"r{i}.json"
        run_cli("audit", str(image), "-f", f"json:{out}")
        outs.append(json.loads(out.read_text())["inventory"])
    assert outs[0] == outs[1]
    assert str(image) not in json.dumps(outs[0])  # no host path: two mounts of one image compare equal
    assert os.path.isdir(image)
