"""Severity follows evidence: a properly prepared real cloud image passes; leftovers and the
incident's signature are told apart (IL202 low, IL206 critical, IL207 info, IL208 low)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from tests.facts.systemd.oracle import NO_PRESET_STATES, list_unit_files, systemctl_available
from tests.support import REPO, need, os_root, run_cli

VENDOR = "usr/lib/systemd/system"


def _audit(image: Path, tmp_path: Path, *args: str) -> tuple[int, dict]:
    out = tmp_path / "report.json"
    proc = run_cli("audit", str(image), "-f", f"json:{out}", *args)
    assert proc.returncode in (0, 1, 3), proc.stderr
    return proc.returncode, json.loads(out.read_text())


def test_a_prepared_cloud_image_passes(clean_cloud_rootfs: Path, tmp_path: Path) -> None:
    code, report = _audit(clean_cloud_rootfs, tmp_path)
    failing = [(f["rule_id"], f["subject"]) for f in report["findings"] if f["failing"]]
    assert code == 0 and failing == [], failing
    by_rule: dict[str, set[str]] = {}
    for f in report["findings"]:
        by_rule.setdefault(f["rule_id"], set()).add(f["unit"] or f["subject"])
    # vendor units restart forever on purpose: reported as the low risk they are, never failing
    assert {"containerd.service", "collectd.service"} <= by_rule.get("IL202", set())
    assert {f["severity"] for f in report["findings"] if f["rule_id"] == "IL202"} == {"low"}
    # nfs-idmapd binds to a unit of a package that is not installed, but nothing starts it at boot
    assert "nfs-idmapd.service" in by_rule.get("IL207", set()) and "IL204" not in by_rule
    # the quiet side of the new rules, on a real image
    outcomes = {r["rule_id"]: r["outcome"] for r in report["rules"]}
    assert outcomes["IL206"] == "pass" and outcomes["IL208"] == "pass"


def test_the_incident_signature_is_critical_offline(tmp_path: Path) -> None:
    entries = yaml.safe_load((REPO / "examples/sample-image.yaml").read_text())["files"]
    image = os_root(tmp_path / "sample", entries)
    code, report = _audit(image, tmp_path, "-c", str(REPO / "examples/sample.imagelint.yaml"))
    critical = [f for f in report["findings"] if f["rule_id"] == "IL206"]
    assert code == 1 and [f["unit"] for f in critical] == ["ecs.service"]
    assert critical[0]["severity"] == "critical" and critical[0]["failing"]


def test_a_unit_enabled_into_a_target_nothing_starts_is_a_leftover(tmp_path: Path) -> None:
    files = {
        f"/{VENDOR}/default.target": "[Unit]\nDescription=default\n",
        f"/{VENDOR}/build-stage.target": "[Unit]\nDescription=only used while building\n",
        f"/{VENDOR}/warmup.service": "[Service]\nType=oneshot\nExecStart=/usr/bin/true\n"
        "[Install]\nWantedBy=build-stage.target\n",
        "/usr/bin/true": "",
    }
    image = os_root(tmp_path / "img", files)
    wants = image / "etc/systemd/system/build-stage.target.wants"
    wants.mkdir(parents=True)
    os.symlink(f"/{VENDOR}/warmup.service", wants / "warmup.service")
    code, report = _audit(image, tmp_path, "--select", "IL208")
    (finding,) = [f for f in report["findings"] if f["rule_id"] == "IL208"]
    assert finding["unit"] == "warmup.service" and finding["severity"] == "low" and code == 0
    # wanted by default.target instead: started at boot, so not a leftover
    os.unlink(wants / "warmup.service")
    boot_wants = image / "etc/systemd/system/default.target.wants"
    boot_wants.mkdir()
    os.symlink(f"/{VENDOR}/warmup.service", boot_wants / "warmup.service")
    _, report = _audit(image, tmp_path, "--select", "IL208")
    assert [f for f in report["findings"] if f["rule_id"] == "IL208"] == []


def test_units_prints_presets_where_systemctl_does(debian_rootfs: Path) -> None:
    need(systemctl_available(), "systemctl is not installed")
    listed = list_unit_files(debian_rootfs)
    proc = run_cli("units", str(debian_rootfs), "--format", "json")
    ours = {u["name"]: u for u in json.loads(proc.stdout)["units"]}
    mismatches = []
    for name, (state, preset) in listed.items():
        want = "-" if state in NO_PRESET_STATES or preset is None else preset
        if name in ours and ours[name]["preset"] != want:
            mismatches.append((name, state, preset, ours[name]["preset"]))
    assert mismatches == []


def test_units_and_audit_agree_on_the_sample_boot_chain(tmp_path: Path) -> None:
    entries = yaml.safe_load((REPO / "examples/sample-image.yaml").read_text())["files"]
    image = os_root(tmp_path / "sample", entries)
    proc = run_cli("units", str(image), "--format", "json")
    ecs = next(u for u in json.loads(proc.stdout)["units"] if u["name"] == "ecs.service")
    _, report = _audit(image, tmp_path, "--select", "IL206")
    (finding,) = [f for f in report["findings"] if f["rule_id"] == "IL206"]
    assert ecs["boot_chain"] and " → ".join(ecs["boot_chain"]) in finding["message"]
