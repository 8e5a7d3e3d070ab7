"""The machine's lifecycle with the real QEMU on a disk that boots nothing: every way out leaves nothing.

A blank raw disk keeps SeaBIOS looking for a boot device: QEMU runs, SSH never answers. That is
enough to see the deadlines, QEMU's own failure, the overlay's cap and SIGTERM at any moment.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from imagelint.vm import VmError
from imagelint.vm.machine import OVMF, MachineSpec, booted, qemu_argv, resolve_firmware
from tests.support import REPO, need, run_cli
from tests.vm.conftest import need_qemu
from tests.vm.processes import qemu_pids

pytestmark = pytest.mark.lane  # each test runs QEMU, one at a time


def blank(tmp_path: Path) -> Path:
    image = tmp_path / "blank.raw"
    with image.open("wb") as out:
        out.truncate(16 << 20)
    return image


def test_qemu_is_given_the_overlay_on_loopback_never_the_image(tmp_path: Path) -> None:
    spec = MachineSpec(image=Path("/images/base.qcow2"), cpus=3, memory_mib=1536)
    argv = qemu_argv(spec, "tcg", tmp_path, 2200, "ssh-ed25519 AAAA x")
    text = " ".join(argv)
    assert "/images/base.qcow2" not in text
    assert f"file={tmp_path / 'overlay.qcow2'},format=qcow2" in text
    assert "hostfwd=tcp:127.0.0.1:2200-:22" in text
    assert argv[argv.index("-smp") + 1] == "3" and argv[argv.index("-m") + 1] == "1536"


@pytest.mark.parametrize(("seed", "credential"), [(True, True), (False, True), (True, False)])
def test_only_the_ways_in_the_image_takes_are_offered(tmp_path: Path, seed: bool, credential: bool) -> None:
    spec = MachineSpec(image=Path("/images/base.qcow2"), seed=seed, credential=credential)
    argv = qemu_argv(spec, "tcg", tmp_path, 2200, "ssh-ed25519 AAAA x")
    assert (f"file={tmp_path / 'seed.iso'},format=raw,media=cdrom,readonly=on" in argv) is seed
    assert ("-smbios" in argv) is credential


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """TMPDIR for the machine's scratch directory: empty again once the machine is gone."""
    path = tmp_path / "tmp"
    path.mkdir()
    monkeypatch.setenv("TMPDIR", str(path))
    return path


def test_no_ssh_within_the_deadline_is_inconclusive_and_leaves_nothing(tmp_path: Path, scratch: Path) -> None:
    need_qemu()
    spec = MachineSpec(image=blank(tmp_path), accel="tcg", boot_timeout=8)
    with pytest.raises(VmError, match="no SSH within 8 s"), booted(spec):
        pass
    assert list(scratch.iterdir()) == []
    assert qemu_pids(str(scratch)) == []


def test_qemu_failing_is_inconclusive_with_qemus_own_reason(tmp_path: Path, scratch: Path) -> None:
    need_qemu()
    spec = MachineSpec(image=blank(tmp_path), accel="tcg", cpus=4096, boot_timeout=60)
    with pytest.raises(VmError, match=r"QEMU exited \(1\) before SSH answered: .*qemu-system"), booted(spec):
        pass
    assert list(scratch.iterdir()) == []


def test_an_overlay_over_its_cap_stops_the_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_qemu()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    spec = MachineSpec(image=blank(tmp_path), accel="tcg", boot_timeout=120, overlay_limit=0)
    with pytest.raises(VmError, match="overlay grew past 0 bytes"), booted(spec):
        pass


def test_sigterm_while_booting_stops_qemu_and_removes_everything(tmp_path: Path) -> None:
    need_qemu()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    image = blank(tmp_path)
    env = {**os.environ, "TMPDIR": str(scratch), "NO_COLOR": "1"}
    exe = Path(sys.executable).parent / "imagelint"
    args = [
        str(exe),
        "vm",
        "check",
        str(image),
        "--accel",
        "tcg",
        "--soak",
        "0",
        "-f",
        f"json:{tmp_path / 'r.json'}",
    ]
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    deadline = time.monotonic() + 240
    while not qemu_pids(str(scratch)) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    pids = qemu_pids(str(scratch))
    assert pids, proc.stderr.read() if proc.poll() is not None else "QEMU never started"
    assert list(scratch.iterdir())  # the machine's scratch directory exists while it runs
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    assert "Traceback" not in err
    assert qemu_pids(str(scratch)) == []
    assert list(scratch.iterdir()) == []
    assert (
        not (tmp_path / "r.json").exists()
        or json.loads((tmp_path / "r.json").read_text())["verdict"] != "pass"
    )


def test_bad_options_are_one_line_and_exit_2(tmp_path: Path) -> None:
    image = blank(tmp_path)
    for option in (["--accel", "xen"], ["--memory", "lots"], ["--firmware", "coreboot"]):
        got = run_cli("vm", "check", str(image), *option)
        assert got.returncode == 2, got.stderr
        assert len(got.stderr.strip().splitlines()) == 1, got.stderr


def boot_sector(tmp_path: Path, text: bytes) -> Path:
    """A raw disk whose MBR code writes ``text`` to the first serial port and halts: a guest that
    prints what it likes on the console from power-on, within a second under TCG."""
    code = bytes.fromhex(
        "fc"  # cld
        "31c0"  # xor ax, ax
        "8ed8"  # mov ds, ax
        "be167c"  # mov si, 0x7c16 (the text, below)
        "baf803"  # mov dx, 0x3f8 (COM1)
        "ac"  # lodsb
        "84c0"  # test al, al
        "7403"  # jz halt
        "ee"  # out dx, al
        "ebf8"  # jmp lodsb
        "f4"  # halt: hlt
        "ebfd"  # jmp halt
    )
    assert len(code) == 0x16 and len(text) < 480 and b"\0" not in text
    sector = (code + text + b"\0").ljust(510, b"\0") + b"\x55\xaa"
    image = tmp_path / "printer.raw"
    image.write_bytes(sector.ljust(1 << 20, b"\0"))
    return image


def test_a_panic_on_the_console_is_inconclusive_with_its_tail_escaped(tmp_path: Path) -> None:
    need_qemu()
    hostile = b"Linux version 6.6.6-evil\r\n\x1b[2J::error::pwned\r\nKernel panic - not syncing: hostile\r\n"
    image = boot_sector(tmp_path, hostile)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / "r.json"
    got = run_cli(
        "vm", "check", str(image), "--accel", "tcg", "--soak", "0", "--boot-timeout", "5m",
        "-f", "text", "-f", f"json:{out}",
        env={"TMPDIR": str(scratch)}, timeout=600,
    )  # fmt: skip
    assert got.returncode == 3, got.stderr
    report = json.loads(out.read_text())
    assert report["verdict"] == "inconclusive"
    said = [e["message"] for e in report["errors"]]
    assert "the guest's kernel panicked: Kernel panic - not syncing: hostile" in said, said
    assert "::error::pwned" in report["facts"]["vm"]["console_tail"]
    assert report["facts"]["vm"]["accelerator"] == "tcg"
    assert "\x1b" not in got.stdout + got.stderr and "\\x1b[2J" in got.stdout
    assert "console: \\x1b[2J::error::pwned" in got.stdout
    assert list(scratch.iterdir()) == []


def test_accel_kvm_never_falls_back_to_tcg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where KVM works the guest's banner shows within the probe and it panics (kvm); where it does
    not (no /dev/kvm, or this nested host, where QEMU's KVM aborts), the run says so: never TCG."""
    need_qemu()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    image = boot_sector(tmp_path, b"Linux version 6.6.6\r\nKernel panic - not syncing: probe\r\n")
    spec = MachineSpec(image=image, accel="kvm", boot_timeout=120, kvm_probe=20)
    with pytest.raises(VmError) as raised, booted(spec):
        pass
    message = str(raised.value)
    if "panicked" in message:
        assert raised.value.accel == "kvm", message
    else:
        assert "/dev/kvm cannot be opened" in message or "KVM probe" in message, message


@pytest.mark.vm_boots  # more minutes of TCG: `make test-vm` (and GitHub CI, with KVM)
def test_auto_firmware_boots_an_esp_only_gpt_disk_under_ovmf_and_says_why(tmp_path: Path) -> None:
    """The disk's table decides: OVMF for a GPT with only an EFI System Partition (an empty one here:
    the firmware finds no loader, SSH never answers), and the report says which firmware and why."""
    from tests.targets.disk.test_boot import gpt

    need_qemu()
    need(OVMF.is_file(), f"{OVMF} is not installed (Debian: ovmf)")
    image = gpt(tmp_path, "ef00")
    spec, why = resolve_firmware(MachineSpec(image=image))
    assert spec.firmware == "uefi" and why.startswith("GPT with an EFI System Partition")
    argv = qemu_argv(spec, "tcg", tmp_path, 2200, "ssh-ed25519 AAAA x")
    assert argv[argv.index("-bios") + 1] == str(OVMF) and argv[argv.index("-machine") + 1] == "q35"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / "r.json"
    got = run_cli(
        "vm", "check", str(image), "--accel", "tcg", "--soak", "0", "--boot-timeout", "20s",
        "-f", "text", "-f", f"json:{out}", env={"TMPDIR": str(scratch)}, timeout=300,
    )  # fmt: skip
    assert got.returncode == 3, got.stderr
    vm = json.loads(out.read_text())["facts"]["vm"]
    assert vm["firmware"] == f"uefi: {why}"
    assert f"vm: firmware uefi: {why}" in got.stdout
    assert list(scratch.iterdir()) == []
