"""The journal rules (rules/journal.yaml) on real journal files: firing, quiet, honest about data."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.facts.journal.conftest import have_tools, journalctl_json
from tests.facts.journal.exportgen import (
    ENA_MESSAGES,
    MACHINE_ID,
    RESTART_ID,
    Host,
    kubelet_line,
    scenario,
    write_journal,
)
from tests.nspawn import booted
from tests.support import REPO, copy_rootfs, os_root, run_cli, wait_for

JOURNAL_RULES = [r["id"] for r in yaml.safe_load((REPO / "rules/journal.yaml").read_text())["rules"]]
KERNEL_SYMPTOMS = [
    "rcu: INFO: rcu_sched self-detected stall on CPU",
    "INFO: task kworker/u8:2:123 blocked for more than 120 seconds.",
    "Memory cgroup out of memory: Killed process 4242 (python3) total-vm:1000kB",
]


def _image_with_journal(root: Path, export: bytes) -> Path:
    os_root(root)
    write_journal(export, root / "var/log/journal")
    return root


def _symptoms(seed: int) -> bytes:
    host = Host(seed)
    host.new_boot(1_734_000_000_000_000)
    out = bytearray(host.kernel("Linux version 6.1.0-28-cloud-amd64", priority="5"))
    for i, message in enumerate([*ENA_MESSAGES, *KERNEL_SYMPTOMS]):
        host.at(host.mono + 5_000_000)
        out += host.kernel(message) + kubelet_line(host, i)
    return bytes(out)


@pytest.fixture(scope="module")
def faulty_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    have_tools()
    return _image_with_journal(tmp_path_factory.mktemp("faulty") / "image", scenario(seed=3) + _symptoms(4))


@pytest.fixture(scope="module")
def quiet_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    have_tools()
    host = Host(9)
    host.new_boot(1_735_000_000_000_000)
    export = host.kernel("Linux version 6.1.0-28-cloud-amd64", priority="5")
    export += b"".join(kubelet_line(host, i) for i in range(200))
    return _image_with_journal(tmp_path_factory.mktemp("quiet") / "image", export)


def _audit(root: Path, *extra: str) -> tuple[int, dict, str]:
    proc = run_cli("audit", str(root), "--select", "pack:journal", "-f", "json", *extra)
    assert "Traceback" not in proc.stderr
    return proc.returncode, (json.loads(proc.stdout) if proc.stdout else {}), proc.stderr


def _outcomes(report: dict) -> dict[str, str]:
    return {r["rule_id"]: r["outcome"] for r in report["rules"] if r["rule_id"] in JOURNAL_RULES}


def test_every_journal_rule_fires_on_the_faulty_journal(faulty_image: Path) -> None:
    code, report, _ = _audit(faulty_image)
    assert code == 1
    assert _outcomes(report) == dict.fromkeys(JOURNAL_RULES, "fail")
    scan = report["facts"]["journal"]
    assert scan["files_read"] == 1 and scan["files_skipped"] == 0 and scan["entries_examined"] > 0


def test_restart_counts_equal_journalctl(faulty_image: Path) -> None:
    _, report, _ = _audit(faulty_image)
    directory = str(faulty_image / "var/log/journal")
    loops = [f for f in report["findings"] if f["rule_id"] == "IL301"]
    # the crash loop in every boot, and the units that restarted up to their start limit
    assert {f["unit"] for f in loops} == {"ecs.service", "fluent-bit.service", "node-exporter.service"}
    assert sum(f["unit"] == "ecs.service" for f in loops) == 3
    for finding in loops:
        boot, unit = finding["evidence"]["boot"], finding["unit"]
        matches = (f"MESSAGE_ID={RESTART_ID}", f"UNIT={unit}", f"_BOOT_ID={boot}")
        oracle = journalctl_json("--directory", directory, *matches)
        assert finding["evidence"]["restarts"] == len(oracle)
        assert finding["evidence"]["max_n_restarts"] == max(int(e["N_RESTARTS"]) for e in oracle)


def test_journal_rules_stay_quiet_on_a_healthy_journal(quiet_image: Path) -> None:
    code, report, _ = _audit(quiet_image)
    assert code == 0 and _outcomes(report) == dict.fromkeys(JOURNAL_RULES, "pass")


def test_no_journal_is_not_applicable_unless_required(clean_rootfs: Path) -> None:
    code, report, _ = _audit(clean_rootfs)
    assert code == 0 and set(_outcomes(report).values()) == {"not-applicable"}
    code, report, _ = _audit(clean_rootfs, "--require-journal")
    assert code == 3 and set(_outcomes(report).values()) == {"error"}
    assert "this run requires a journal" in report["errors"][0]["message"]


@pytest.mark.parametrize("damage", ["zero-length", "truncated", "unknown-flag"])
def test_unreadable_journal_is_inconclusive_never_a_pass(
    quiet_image: Path, tmp_path: Path, damage: str
) -> None:
    root = tmp_path / "image"
    shutil.copytree(quiet_image, root, symlinks=True)
    (journal,) = (root / "var/log/journal" / MACHINE_ID).glob("*.journal")
    data = bytearray(journal.read_bytes())
    if damage == "zero-length":
        data = bytearray()
    elif damage == "truncated":
        data = data[: len(data) // 2]
    else:
        data[12] |= 0x80  # an incompatible flag no systemd defines
    journal.write_bytes(bytes(data))
    code, report, _ = _audit(root)
    assert code == 3 and report["verdict"] == "inconclusive"
    assert any(str(journal.relative_to(root)) in (e["where"] or "") for e in report["errors"])


def test_findings_from_the_readable_part_survive_a_damaged_file(faulty_image: Path, tmp_path: Path) -> None:
    root = tmp_path / "image"
    shutil.copytree(faulty_image, root, symlinks=True)
    (journal,) = (root / "var/log/journal" / MACHINE_ID).glob("*.journal")
    journal.write_bytes(journal.read_bytes()[: journal.stat().st_size * 2 // 3])
    code, report, _ = _audit(root, "--select", "IL301")
    assert code == 1 and report["errors"]  # the loop is there, and the gap is reported too
    assert any(f["rule_id"] == "IL301" for f in report["findings"])


def test_journal_option_reads_a_host_directory(faulty_image: Path, clean_rootfs: Path) -> None:
    code, report, _ = _audit(
        clean_rootfs, "--journal", str(faulty_image / "var/log/journal"), "--select", "IL301"
    )
    assert code == 1 and report["facts"]["journal"]["source"] == str(faulty_image / "var/log/journal")


CRASHY = """[Unit]
Description=exits 1 at once, restarts every {sec}s
[Service]
ExecStart=/bin/sh -c 'echo starting; exit 1'
Restart=on-failure
RestartSec={sec}
[Install]
WantedBy=multi-user.target
"""


@pytest.mark.root
@pytest.mark.slow
def test_a_journal_recorded_by_real_systemd(debian_rootfs: Path, tmp_path: Path) -> None:
    """Boot the real image, let a unit loop and another trip its start limit, then audit its journal."""
    root = copy_rootfs(debian_rootfs, tmp_path / "rootfs")
    units = root / "etc/systemd/system"
    for name, sec in (("il-loop", 3), ("il-limit", "500ms")):
        (units / f"{name}.service").write_text(CRASHY.format(sec=sec))
        (units / "multi-user.target.wants" / f"{name}.service").symlink_to(
            f"/etc/systemd/system/{name}.service"
        )

    def ready(prefix: list[str]) -> bool:
        state = subprocess.run([*prefix, "systemctl", "is-system-running"], capture_output=True, text=True)
        return state.stdout.strip() in ("running", "degraded")

    def looped_and_tripped(prefix: list[str]) -> bool:
        show = subprocess.run(
            [*prefix, "systemctl", "show", "-p", "NRestarts", "--value", "il-loop.service"],
            capture_output=True,
            text=True,
        )
        failed = subprocess.run([*prefix, "systemctl", "is-failed", "--quiet", "il-limit.service"])
        return show.stdout.strip().isdigit() and int(show.stdout) >= 6 and failed.returncode == 0

    with booted(root, volatile=False, ready=ready) as prefix:
        assert wait_for(lambda: looped_and_tripped(prefix), timeout=90), "the units did not loop and trip"
        subprocess.run([*prefix, "journalctl", "--sync"], check=True)  # on disk before the audit
    code, report, _ = _audit(root)
    loops = {f["unit"]: f for f in report["findings"] if f["rule_id"] == "IL301"}
    limits = {f["unit"] for f in report["findings"] if f["rule_id"] == "IL302"}
    assert code == 1 and "il-loop.service" in loops and "il-limit.service" in limits
    directory = str(root / "var/log/journal")
    oracle = journalctl_json("--directory", directory, f"MESSAGE_ID={RESTART_ID}", "UNIT=il-loop.service")
    assert loops["il-loop.service"]["evidence"]["restarts"] == len(oracle) >= 5
