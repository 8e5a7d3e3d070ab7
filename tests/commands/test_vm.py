"""`imagelint vm check`: the crashloop disk image booted for real (its own kernel, cgroup v2), soaked.

The one boot-and-soak of the suite: the image of scripts/build-test-vm-image.sh --variant crashloop,
whose leaky.service restarts every second leaving a dying memory cgroup each time, booted in QEMU
(TCG here, KVM where the probe shows it works), reached with the throwaway key over the real ssh
client and collector, soaked for 60 s. The soak must name leaky.service from the v2 counters, the
report must say what the machine was, the image must be unchanged, and nothing may be left behind.
The file's tests are in the lane beside the parallel phase (tests/conftest.py): the boots hold no
worker. The image scope is judged on the disk image read offline (the boot's own writes are not the
image's).
The console's kernel lines are judged on a boot sector that prints them (seconds, no real boot).
Marked vm_boots, so `make test-vm` runs them and `make test` does not (each is minutes of TCG; GitHub's
CI runs them with KVM): the clean variant (an image cleaned as it should ship) passing whole (image,
host, soak and console), a signal while the collector runs, a guest outgrowing --disk-limit, and the
clean variant's root partition carved out as a bare ext4 filesystem, booted by its own kernel.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import REPO, as_a_foreground_job, need, os_root, run_cli
from tests.vm.conftest import carve_root, need_qemu, vm_image
from tests.vm.processes import group_members, holding, qemu_pids
from tests.vm.test_machine import boot_sector

pytestmark = pytest.mark.lane  # a whole VM for minutes, one at a time


@pytest.fixture(scope="module")
def crashloop_vm_image() -> Path:
    need_qemu()
    return vm_image("crashloop")


@pytest.fixture(scope="module")
def clean_vm_image() -> Path:
    need_qemu()
    return vm_image("clean")


@pytest.fixture(scope="module")
def nocloud_vm_image() -> Path:
    need_qemu()
    return vm_image("nocloud")


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
    # a boot sector has no file system to read offline: both ways in are offered, and the report says why
    access = report["facts"]["vm"]["access"]
    assert access["offered"] == ["nocloud-seed", "smbios-credential"]
    assert access["nocloud_seed"].startswith("offered: the image could not be read offline")
    assert report["facts"]["console"]["console"]["entries_examined"] == 4
    assert "\x1b" not in got.stdout + got.stderr
    assert not [line for line in got.stdout.splitlines() if line.startswith("::error::pwn")]
    assert list(scratch.iterdir()) == []


def _vm_check(
    tmp_path: Path, image: Path, *options: str, timeout: float = 300
) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """``vm check IMAGE OPTIONS -f json:OUT`` with a scratch directory of its own as TMPDIR: the run,
    the JSON report's path and the scratch directory (empty again once the run is over)."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / "r.json"
    got = run_cli(
        "vm", "check", str(image), *options, "-f", f"json:{out}",
        env={"TMPDIR": str(scratch), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}, timeout=timeout,
    )  # fmt: skip
    return got, out, scratch


def _check_ext4_image(
    tmp_path: Path, files: dict, *extra: str
) -> tuple[subprocess.CompletedProcess[str], dict, Path]:
    """``vm check --soak 0`` of a real ext4 image holding ``files`` (an OS root, tests.support.os_root):
    the run, its JSON report and the scratch directory it was given as TMPDIR."""
    need(shutil.which("mke2fs") is not None, "mke2fs is not installed (Debian: e2fsprogs)")
    tree = os_root(tmp_path / "tree", files)
    image = tmp_path / "image.ext4"
    subprocess.run(
        ["mke2fs", "-q", "-t", "ext4", "-d", str(tree), str(image), "16M"], check=True, capture_output=True
    )
    got, out, scratch = _vm_check(tmp_path, image, "--soak", "0", *extra)
    return got, json.loads(out.read_text()), scratch


def test_an_image_that_takes_neither_way_in_is_refused_before_any_boot_in_one_line(tmp_path: Path) -> None:
    """No cloud-init and systemd 247 (before SMBIOS credentials), read offline from a real ext4 disk
    image: exit 3 at once, one escaped line saying what is missing, no QEMU, no scratch file; the
    report says what was read (facts.vm.access) beside the image part."""
    files = {"/usr/sbin/sshd": "", "/lib/systemd/libsystemd-shared-247.so": ""}
    got, report, scratch = _check_ext4_image(tmp_path, files, "--boot-timeout", "20s")
    line = (
        "vm: no cloud-init (/usr/bin/cloud-init), and systemd 247 < 252 does not take "
        "ssh.authorized_keys.root: this image cannot be reached to soak it"
    )
    assert got.returncode == 3, got.stderr
    assert got.stderr.splitlines().count(line) == 1, got.stderr
    assert "booting" not in got.stderr and "Traceback" not in got.stderr
    assert report["verdict"] == "inconclusive"
    assert [e["message"] for e in report["errors"]] == [line.removeprefix("vm: ")]
    assert report["facts"]["vm"]["access"]["offered"] == []
    assert report["facts"]["vm"]["access"]["systemd_version"] == 247
    assert "image" in report["facts"]  # the image part was read offline all the same
    assert list(scratch.iterdir()) == [] and qemu_pids(str(scratch)) == []


def test_a_refused_image_whose_offline_part_already_fails_exits_1_without_booting(tmp_path: Path) -> None:
    """The verdict decides: a host private key baked in (IL101) fails the image part read offline, so
    the refused image exits 1, not 3, as docs/vm.md says; still no boot."""
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n"
    files = {
        "/lib/systemd/libsystemd-shared-247.so": "",
        "/etc/ssh/ssh_host_ed25519_key": {"content": key, "mode": "600"},
    }
    got, report, scratch = _check_ext4_image(tmp_path, files)
    assert got.returncode == 1, got.stderr
    assert "vm: no sshd (/usr/sbin/sshd or /usr/bin/sshd) in the image" in got.stderr
    assert "booting" not in got.stderr
    assert any(f["rule_id"] == "IL101" and f["evidence"]["scope"] == "image" for f in report["findings"])
    assert list(scratch.iterdir()) == [] and qemu_pids(str(scratch)) == []


def reachable_bare_ext4(tmp_path: Path, entries: dict[str, object]) -> Path:
    """A bare ext4 filesystem image (no partition table) that takes the NoCloud seed (cloud-init, sshd)."""
    need(shutil.which("mke2fs") is not None, "mke2fs is not installed (Debian: e2fsprogs)")
    tree = os_root(
        tmp_path / "tree",
        {"/usr/sbin/sshd": "", "/usr/bin/cloud-init": "", "/etc/cloud/cloud.cfg": "", **entries},
    )
    image = tmp_path / "bare.ext4"
    subprocess.run(
        ["mke2fs", "-q", "-t", "ext4", "-d", str(tree), str(image), "16M"], check=True, capture_output=True
    )
    return image


def test_a_bare_filesystem_with_no_kernel_in_boot_is_refused_before_any_boot_in_one_line(
    tmp_path: Path,
) -> None:
    """No partition table, so no bootloader: the kernel must come from /boot, and there is none there.
    Exit 3 at once (today: a boot that waits in SeaBIOS to the deadline), no QEMU, no scratch file."""
    image = reachable_bare_ext4(tmp_path, {"/boot/config-6.1.0-10-cloud-amd64": ""})
    got, out, scratch = _vm_check(tmp_path, image, "--soak", "0", "--boot-timeout", "20s")
    line = "vm: a bare filesystem image with no kernel in /boot cannot be booted"
    assert got.returncode == 3, got.stderr
    assert got.stderr.splitlines().count(line) == 1, got.stderr
    assert "booting" not in got.stderr and "Traceback" not in got.stderr
    report = json.loads(out.read_text())
    assert [e["message"] for e in report["errors"]] == [line.removeprefix("vm: ")]
    assert report["facts"]["vm"]["boot"] == "direct-kernel"
    assert report["facts"]["vm"]["access"]["offered"] == ["nocloud-seed"]
    assert list(scratch.iterdir()) == [] and qemu_pids(str(scratch)) == []


def test_a_bare_filesystem_whose_kernel_qemu_cannot_load_is_inconclusive_with_qemus_reason(
    tmp_path: Path,
) -> None:
    """/boot/vmlinuz-V holds no kernel: QEMU refuses it at once (the real QEMU's own words), the run is
    inconclusive, the report says it was a direct kernel boot of that file, nothing is left behind."""
    need_qemu()
    version = "6.1.0-10-cloud-amd64"
    image = reachable_bare_ext4(
        tmp_path, {f"/boot/vmlinuz-{version}": "not a kernel\n", f"/boot/initrd.img-{version}": "i"}
    )
    got, out, scratch = _vm_check(tmp_path, image, "--soak", "0", "--accel", "tcg", "--boot-timeout", "60s")
    assert got.returncode == 3, got.stderr
    assert f"booting vmlinuz-{version} directly (root=UUID=" in got.stderr
    report = json.loads(out.read_text())
    [error] = [e["message"] for e in report["errors"]]
    assert error.startswith("QEMU exited (1) before SSH answered"), error
    vm = report["facts"]["vm"]
    assert vm["boot"] == "direct-kernel" and vm["kernel_file"] == f"/boot/vmlinuz-{version}", vm
    assert vm["firmware"].startswith("bios: direct kernel boot (no partition table")
    assert list(scratch.iterdir()) == [] and qemu_pids(str(scratch)) == []


@pytest.mark.parametrize("firmware", ["bios", "uefi"])
def test_a_firmware_asked_for_a_bare_filesystem_is_a_usage_error(tmp_path: Path, firmware: str) -> None:
    """A bare filesystem has no bootloader for any firmware to start: --firmware bios|uefi is refused
    (exit 2, one line), not silently overridden."""
    image = reachable_bare_ext4(
        tmp_path, {"/boot/vmlinuz-6.1.0-10-cloud-amd64": "k", "/boot/initrd.img-6.1.0-10-cloud-amd64": "i"}
    )
    got = run_cli(
        "vm", "check", str(image), "--soak", "0", "--boot-timeout", "20s", "--firmware", firmware, timeout=300
    )
    assert got.returncode == 2, got.stderr
    said = [line for line in got.stderr.splitlines() if f"--firmware {firmware}" in line]
    assert len(said) == 1 and "bare filesystem" in said[0] and "leave --firmware auto" in said[0], got.stderr
    assert "booting" not in got.stderr and "Traceback" not in got.stderr


@pytest.mark.vm_boots  # more minutes of TCG: `make test-vm` (and GitHub CI, with KVM)
@pytest.mark.parametrize("how", ["SIGTERM to the process", "SIGINT to its process group (Ctrl-C)"])
def test_a_signal_while_collecting_stops_the_machine_and_leaves_nothing(
    clean_vm_image: Path, tmp_path: Path, how: str
) -> None:
    """Once SSH answered and the collector runs (its ssh client holds the throwaway key), SIGTERM
    (a CI runner's timeout) or SIGINT to the whole foreground group (Ctrl-C) ends the run: exit 3 as
    documented, QEMU's process group gone, no ssh client left, overlay, seed and key removed."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / "r.json"
    exe = Path(sys.executable).parent / "imagelint"
    proc = subprocess.Popen(
        [str(exe), "vm", "check", str(clean_vm_image), "--soak", "10m", "--boot-timeout", "12m",
         "-f", f"json:{out}"],
        env={**os.environ, "TMPDIR": str(scratch), "NO_COLOR": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True,
        preexec_fn=as_a_foreground_job,
    )  # fmt: skip
    assert proc.stderr is not None
    said = []
    for line in proc.stderr:  # the run ends by itself at the boot deadline: this loop is bounded
        said.append(line)
        if "; auditing and soaking" in line:
            break
    assert said and "; auditing and soaking" in said[-1], "".join(said)
    deadline = time.monotonic() + 120
    while not any(" -i " in c and c.startswith("ssh ") for c in holding(str(scratch))):
        assert time.monotonic() < deadline and proc.poll() is None, holding(str(scratch))
        time.sleep(0.5)
    (qemu,) = qemu_pids(str(scratch))
    qemu_group = os.getpgid(qemu)
    assert qemu_group != proc.pid  # QEMU in its own group, the ssh client in imagelint's
    time.sleep(5)  # well into the collection
    if how.startswith("SIGTERM"):
        proc.send_signal(signal.SIGTERM)
    else:
        os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 3, err
    assert "Traceback" not in err
    if how.startswith("SIGTERM"):  # Ctrl-C also ends the ssh client: either may be seen first
        assert "interrupted" in err, err
    assert group_members(qemu_group) == [] and group_members(proc.pid) == []
    assert holding(str(scratch)) == []
    assert list(scratch.iterdir()) == []  # overlay, seed, key
    assert not out.exists() or json.loads(out.read_text())["verdict"] != "pass"


@pytest.mark.vm_boots  # more minutes of TCG: `make test-vm` (and GitHub CI, with KVM)
def test_a_guest_writing_past_the_disk_limit_is_stopped_and_its_real_console_is_judged(
    clean_vm_image: Path, tmp_path: Path
) -> None:
    """The real guest's own boot writes (journal, cloud-init, host keys: several MiB in its first
    minute) outgrow ``--disk-limit 2M``: the machine is stopped, the run inconclusive, nothing left. The
    console it printed until then, a real 6.1 kernel's boot, is read as kernel lines and raises nothing."""
    got, out, scratch = _vm_check(
        tmp_path, clean_vm_image, "--soak", "0", "--disk-limit", "2M", "--boot-timeout", "12m", timeout=1200
    )
    assert got.returncode == 3, got.stderr[-3000:]
    report = json.loads(out.read_text())
    said = [e["message"] for e in report["errors"]]
    assert "the overlay grew past 2,097,152 bytes; the machine was stopped" in said, said
    console = report["facts"]["console"]["console"]
    assert console["files_read"] == 1 and console["entries_examined"] > 100  # the kernel's boot lines
    assert not [f for f in report["findings"] if f["evidence"]["scope"] == "console"]
    assert qemu_pids(str(scratch)) == [] and list(scratch.iterdir()) == []


@pytest.mark.vm_boots  # more minutes of TCG: `make test-vm` (and GitHub CI, with KVM)
def test_the_clean_image_passes_whole_image_host_soak_and_console(
    clean_vm_image: Path, tmp_path: Path
) -> None:
    """The clean variant is an image cleaned as it should ship (scripts/build-test-vm-image.sh): no part
    raises a finding or an error, so the run passes, exit 0; the crashloop variant's soak names its unit."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / "report.json"
    got = run_cli(
        "vm", "check", str(clean_vm_image), "--soak", "60s", "--interval", "5s", "--boot-timeout", "12m",
        "-f", f"json:{out}", "-f", "text",
        env={"TMPDIR": str(scratch), "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        timeout=1800,
    )  # fmt: skip
    report = json.loads(out.read_text())
    assert [(f["evidence"]["scope"], f["rule_id"], f["message"]) for f in report["findings"]] == []
    assert report["errors"] == [] and report["verdict"] == "pass", report["errors"]
    assert got.returncode == 0, got.stderr[-3000:]
    parts = {name for name in ("image", "host", "soak", "console") if name in report["facts"]}
    assert parts == {"image", "host", "soak", "console"}, sorted(report["facts"])
    assert report["facts"]["soak"]["soak"]["cut_short"] is False
    assert report["facts"]["console"]["console"]["entries_examined"] > 100  # a real kernel's boot lines
    assert report["facts"]["vm"]["overlay_bytes"] > 0 and report["facts"]["vm"]["firmware"] == "bios"
    assert list(scratch.iterdir()) == [] and qemu_pids(str(scratch)) == []


@pytest.mark.vm_boots  # more minutes of TCG: `make test-vm` (and GitHub CI, with KVM)
def test_a_bare_root_filesystem_is_booted_by_the_kernel_in_its_boot_and_reached(
    clean_vm_image: Path, tmp_path: Path
) -> None:
    """The clean image's root partition carved out (a bare ext4 filesystem: what some pipelines ship)
    has no bootloader: it boots by the kernel and initrd of its own /boot, root=UUID=, and SSH answers;
    the image is not written, and nothing is left behind."""
    bare = carve_root(clean_vm_image, tmp_path / "root.ext4")
    before = digest(bare)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / "report.json"
    got = run_cli(
        "vm", "check", str(bare), "--soak", "0", "--boot-timeout", "12m", "-f", f"json:{out}",
        env={"TMPDIR": str(scratch), "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        timeout=1500,
    )  # fmt: skip
    report = json.loads(out.read_text())
    vm = report["facts"]["vm"]
    assert report["errors"] == [], (report["errors"], got.stderr[-3000:])  # SSH answered, the collector ran
    assert vm["boot"] == "direct-kernel" and vm["firmware"] == "bios", vm
    assert vm["kernel_file"].startswith("/boot/vmlinuz-6.1.0-") and vm["kernel_file"].endswith("-cloud-amd64")
    assert vm["cmdline"].startswith("root=UUID=") and "console=ttyS0,115200" in vm["cmdline"]
    assert vm["boot_why"].startswith("no partition table, a bare filesystem: /vmlinuz points to vmlinuz-")
    assert vm["guest_kernel"] == vm["kernel_file"].removeprefix("/boot/vmlinuz-")  # the console's banner
    assert {"image", "host", "console"} <= set(report["facts"])
    assert got.returncode == {"pass": 0, "fail": 1}[report["verdict"]], got.stderr[-3000:]
    assert digest(bare) == before
    assert list(scratch.iterdir()) == [] and qemu_pids(str(scratch)) == []


@pytest.mark.vm_boots  # more minutes of TCG: `make test-vm` (and GitHub CI, with KVM)
def test_an_image_without_cloud_init_is_reached_through_the_smbios_credential_alone(
    nocloud_vm_image: Path, tmp_path: Path
) -> None:
    """The nocloud variant has no cloud-init, Debian 12's systemd 252 and its tmpfiles provision.conf:
    decided offline before the boot, only the SMBIOS credential is offered (no seed ISO is attached),
    and SSH answers through it: the only key root has is the one systemd-tmpfiles installed from it."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / "report.json"
    got = run_cli(
        "vm", "check", str(nocloud_vm_image), "--soak", "0", "--boot-timeout", "12m",
        "-f", f"json:{out}", "-f", "text",
        env={"TMPDIR": str(scratch), "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        timeout=1500,
    )  # fmt: skip
    report = json.loads(out.read_text())
    assert "vm: offering the key by smbios-credential" in got.stderr, got.stderr[-3000:]
    vm = report["facts"]["vm"]
    assert vm["access"]["offered"] == ["smbios-credential"], vm["access"]
    assert vm["access"]["systemd_version"] == 252
    assert vm["access"]["nocloud_seed"] == "no cloud-init (/usr/bin/cloud-init)"
    assert "/usr/lib/tmpfiles.d/provision.conf" in vm["access"]["smbios_credential"]
    assert report["errors"] == [], report["errors"]  # SSH answered and the collector ran
    assert vm["boot_to_ssh_s"] > 0 and {"image", "host", "console"} <= set(report["facts"])
    # an image cleaned as it should ship, like the clean variant: it passes whole
    assert [(f["evidence"]["scope"], f["rule_id"], f["message"]) for f in report["findings"]] == []
    assert report["verdict"] == "pass" and got.returncode == 0, got.stderr[-3000:]
    assert list(scratch.iterdir()) == [] and qemu_pids(str(scratch)) == []
