"""`imagelint vm check`: the crashloop disk image booted for real (its own kernel, cgroup v2), soaked.

The one boot-and-soak of the suite: the image of scripts/build-test-vm-image.sh --variant crashloop,
whose leaky.service restarts every second leaving a dying memory cgroup each time, booted in QEMU
(TCG here, KVM where the probe shows it works), reached with the throwaway key over the real ssh
client and collector, soaked for 60 s. The soak must name leaky.service from the v2 counters, the
report must say what the machine was, the image must be unchanged, and nothing may be left behind.
The image scope is judged on the disk image read offline (the boot's own writes are not the image's).
The clean variant passing is in benchmarks/vm_soak.py (a second boot does not fit the suite's time).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.support import run_cli
from tests.vm.conftest import need_qemu, vm_image
from tests.vm.test_machine import boot_sector, qemu_pids

pytestmark = pytest.mark.serial  # a whole VM for minutes


@pytest.fixture(scope="module")
def crashloop_vm_image() -> Path:
    need_qemu()
    return vm_image("crashloop")


def digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def test_the_crashloop_image_boots_and_its_soak_names_the_unit_from_the_v2_counters(
    crashloop_vm_image: Path, tmp_path: Path
) -> None:
    before = digest(crashloop_vm_image)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / "report.json"
    got = run_cli(
        "vm", "check", str(crashloop_vm_image),
        "--soak", "60s", "--interval", "5s", "--boot-timeout", "12m",
        "-f", f"json:{out}", "-f", "text",
        env={"TMPDIR": str(scratch), "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        timeout=1800,
    )  # fmt: skip
    report = json.loads(out.read_text())
    assert got.returncode == 1, (got.stderr[-3000:], got.stdout[-3000:])
    vm = report["facts"]["vm"]
    assert vm["accelerator"] in ("kvm", "tcg") and vm["vcpus"] == 2 and vm["memory_mib"] == 2048
    assert vm["cgroup_layout"] == "v2"
    assert vm["guest_kernel"].startswith("6.1.")
    soak_findings = [f for f in report["findings"] if f["evidence"].get("scope") == "soak"]
    assert any("leaky.service" in json.dumps(f) for f in soak_findings), soak_findings
    growth = [f for f in soak_findings if "dying" in f["message"]]
    assert growth and any("leaky.service" in f["message"] for f in growth), growth
    assert report["facts"]["soak"]["soak"]["layout"]["layout"] == "v2"
    # the image scope is the image as shipped, read offline: what the boot and imagelint's own access
    # wrote (the throwaway key, cloud-init's state for the seed) is not judged as baked in
    by_scope = {f["evidence"]["scope"] for f in report["findings"]}
    assert {"image", "host", "soak"} <= by_scope, by_scope
    assert not [f for f in report["findings"] if f["rule_id"] in ("IL104", "IL108")]
    assert any(f["rule_id"] == "IL202" and f["evidence"]["scope"] == "image" for f in report["findings"])
    assert digest(crashloop_vm_image) == before  # the image was never written
    assert list(scratch.iterdir()) == []  # overlay, seed, key: gone
    assert qemu_pids(str(scratch)) == []


def test_kernel_lines_on_the_console_are_judged_by_the_journal_rules_before_ssh_ever_answers(
    tmp_path: Path,
) -> None:
    """A guest whose kernel soft-locks and panics before any shell: the soft lockup is the journal's
    IL314 finding, found on the console (``scope: console``), escaped in every output; the panic is the
    run's reason, the console's tail in the report; a benign kernel line is no finding."""
    need_qemu()
    hostile = (
        b"[    0.000000] Linux version 6.6.6-evil\r\n"
        b"[    0.100000] rcu: Hierarchical RCU implementation.\r\n"
        b"[   31.000000] watchdog: BUG: soft lockup - CPU#0 stuck for 23s! [\x1b[2J::error::pwn:1]\r\n"
        b"[   32.000000] Kernel panic - not syncing: softlockup: hung tasks\r\n"
    )
    image = boot_sector(tmp_path, hostile)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / "r.json"
    got = run_cli(
        "vm", "check", str(image), "--accel", "tcg", "--soak", "0", "--boot-timeout", "5m",
        "-f", "text", "-f", "github", "-f", f"json:{out}",
        env={"TMPDIR": str(scratch)}, timeout=600,
    )  # fmt: skip
    assert got.returncode == 1, got.stderr  # a failing finding, whatever else could not be judged
    report = json.loads(out.read_text())
    (lockup,) = [f for f in report["findings"] if f["evidence"].get("scope") == "console"]
    assert lockup["rule_id"] == "IL314" and lockup["evidence"]["boot"] == "console"
    assert (
        lockup["evidence"]["sample"] == "watchdog: BUG: soft lockup - CPU#0 stuck for 23s! [::error::pwn:1]"
    )
    assert any("kernel panicked" in e["message"] for e in report["errors"])
    assert "Kernel panic" in report["facts"]["vm"]["console_tail"]
    assert report["facts"]["console"]["console"]["entries_examined"] == 4
    assert "\x1b" not in got.stdout + got.stderr
    assert not [line for line in got.stdout.splitlines() if line.startswith("::error::pwn")]
    assert list(scratch.iterdir()) == []
