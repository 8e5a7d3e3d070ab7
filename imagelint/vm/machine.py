"""The throwaway machine: boot an image in QEMU on an overlay, wait for its SSH, stop it, leave nothing.

:func:`booted` is a context manager. On the way in: a private scratch directory (0700) with the
overlay, the key pair, the seed and the ``known_hosts`` file; a free loopback port forwarded to the
guest's port 22 (slirp, no host network set-up); QEMU in its own process group, its serial console
read from power-on (:mod:`imagelint.vm.console`). The accelerator: KVM only when ``/dev/kvm`` opens
and the guest's kernel prints its banner on the console within :data:`KVM_PROBE` seconds, else TCG
(a fresh overlay, so the probe leaves no trace). Then ``ssh ... true`` is retried until it succeeds
(slirp accepts the connection before sshd listens) within the boot deadline. A panic on the console,
QEMU exiting, the overlay growing past its cap or the deadline passing is a :class:`VmError`
(inconclusive) with the console's tail. On the way out, whatever happened (an error, SIGINT, SIGTERM:
:func:`signals_interrupt`): the process group is stopped (SIGTERM, then SIGKILL) and waited for, and
the scratch directory removed.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import field, replace
from pathlib import Path
from typing import IO

from imagelint.facts.journal.console import ConsoleLog
from imagelint.limits import lifted
from imagelint.records import dataclass
from imagelint.vm import VmError
from imagelint.vm.access import client_command, make_key, make_seed, smbios_credential
from imagelint.vm.console import Console
from imagelint.vm.disk import allocated, choose_firmware, create_overlay, image_format
from imagelint.vm.kernel import DirectBoot

KVM_PROBE = 20.0  # seconds for the kernel's banner under KVM before falling back to TCG
SSH_RETRY = 5.0  # seconds between ssh attempts
SSH_ATTEMPT = 45.0  # seconds one `ssh ... true` may take
SETTLE_ATTEMPT = 300.0  # seconds one wait for cloud-init to finish may take (retried to the deadline)
# cloud-init restarts sshd in its config stage (set_passwords), after sshd first answers: the collector's
# connection would be reset. With the seed offered, the guest is ready once cloud-init has finished.
SETTLE = "command -v cloud-init >/dev/null 2>&1 && cloud-init status --wait >/dev/null 2>&1; true"
STOP_GRACE = 10.0  # seconds QEMU has to exit on SIGTERM before SIGKILL
WATCH_EVERY = 2.0  # seconds between checks of QEMU, the console and the overlay
QEMU_STDERR_KEPT = 4096
OVMF = Path("/usr/share/ovmf/OVMF.fd")


@dataclass(frozen=True)
class MachineSpec:
    image: Path
    cpus: int = 2
    memory_mib: int = 2048
    accel: str = "auto"  # auto | kvm | tcg
    firmware: str = "auto"  # auto | bios | uefi
    boot_timeout: float = 600.0
    overlay_limit: int = 4 << 30  # bytes the overlay may hold
    kvm_probe: float = KVM_PROBE
    qemu: str = "qemu-system-x86_64"
    seed: bool = True  # offer the key by a NoCloud seed (cloud-init: :mod:`imagelint.vm.reachable`)
    credential: bool = True  # and by the SMBIOS credential ssh.authorized_keys.root (systemd 252+)
    direct: DirectBoot | None = None  # a bare filesystem image: its kernel booted by QEMU (:mod:`.kernel`)


@dataclass
class Machine:
    """A booted machine: what the report says about it, and how to reach it."""

    spec: MachineSpec
    scratch: Path
    fmt: str
    port: int
    ssh: list[str]
    accel: str = ""
    accel_note: str = ""
    firmware_note: str = ""  # why this firmware (``--firmware auto`` reads the partition table)
    console: Console | None = None
    process: _Qemu | None = None  # the QEMU running now: stopped on the way out, whatever happens
    boot_seconds: float = 0.0
    powered_on: float = 0.0  # time.monotonic() when QEMU was started
    powered_on_wall: float = 0.0  # time.time() then: the console's printk times count from it
    limit_hit: threading.Event = field(default_factory=threading.Event)

    @property
    def kernel(self) -> str | None:
        return self.console.kernel if self.console else None

    def console_log(self) -> ConsoleLog | None:
        """The console's kernel lines for the signal rules (complete once QEMU is stopped)."""
        if self.console is None:
            return None
        return self.console.log(int(self.powered_on_wall * 1_000_000))

    def facts(self) -> dict[str, object]:
        return {
            "image": str(self.spec.image),
            "format": self.fmt,
            "accelerator": self.accel,
            "accelerator_note": self.accel_note,
            "vcpus": self.spec.cpus,
            "memory_mib": self.spec.memory_mib,
            "firmware": self.spec.firmware,
            "firmware_note": self.firmware_note,
            **(self.spec.direct.facts() if self.spec.direct else {"boot": "bootloader"}),
            "guest_kernel": self.kernel,
            "boot_to_ssh_s": round(self.boot_seconds, 1),
            "overlay_bytes": allocated(self.scratch / "overlay.qcow2"),
            "console": self.console.summary() if self.console else {},
        }

    def check(self) -> None:
        """Raise a :class:`VmError` when the overlay went over its cap (the watcher stopped QEMU)."""
        if self.limit_hit.is_set():
            raise VmError(
                f"the overlay grew past {self.spec.overlay_limit:,} bytes; the machine was stopped",
                where=str(self.spec.image),
                console=self.console.last() if self.console else "",
            )


class _Qemu:
    """One QEMU process in its own process group, its console and its standard error read."""

    def __init__(self, argv: list[str]) -> None:
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=lifted,  # QEMU's guest memory alone is over imagelint's own soft limits
            )
        except OSError as exc:
            raise VmError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.console = Console(self.proc.stdout)
        self.console.start()
        self.errors: collections.deque[bytes] = collections.deque(maxlen=64)
        self._err = threading.Thread(target=self._read_errors, args=(self.proc.stderr,), daemon=True)
        self._err.start()

    def _read_errors(self, stream: IO[bytes]) -> None:
        for line in iter(lambda: stream.readline(QEMU_STDERR_KEPT), b""):
            self.errors.append(line)

    def said(self) -> str:
        lines = b"".join(self.errors)[-QEMU_STDERR_KEPT:].decode("utf-8", "replace").strip().splitlines()
        return lines[-1].strip() if lines else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        with contextlib.suppress(ProcessLookupError):  # anything left in the group
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.console.join(timeout=5)
        self._err.join(timeout=5)


def free_port() -> int:
    """A loopback port free now (QEMU binds it a moment later; a clash is a QEMU error, reported)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def kvm_usable() -> bool:
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    os.close(fd)
    return True


def qemu_argv(spec: MachineSpec, accel: str, scratch: Path, port: int, public_key: str) -> list[str]:
    """QEMU's command line: the overlay, the seed, the credential, the console on standard output."""
    argv = [
        spec.qemu,
        "-accel",
        accel,
        *(["-cpu", "host"] if accel == "kvm" else []),
        "-machine",
        "q35" if spec.firmware == "uefi" else "pc",
        "-m",
        str(spec.memory_mib),
        "-smp",
        str(spec.cpus),
        "-display",
        "none",
        "-monitor",
        "none",
        "-serial",
        "stdio",
        "-no-reboot",
        "-nodefaults",
        "-drive",
        f"file={scratch / 'overlay.qcow2'},format=qcow2,if=virtio,cache=unsafe",
        *(["-drive", f"file={scratch / 'seed.iso'},format=raw,media=cdrom,readonly=on"] if spec.seed else []),
        *(["-smbios", smbios_credential(public_key)] if spec.credential else []),
        "-netdev",
        f"user,id=n0,hostfwd=tcp:127.0.0.1:{port}-:22",
        "-device",
        "virtio-net-pci,netdev=n0",
    ]
    if spec.firmware == "uefi":
        argv += ["-bios", str(OVMF)]
    if spec.direct is not None:  # QEMU loads the kernel the image's /boot offers (:mod:`.kernel`)
        argv += ["-kernel", str(scratch / "kernel"), "-initrd", str(scratch / "initrd")]
        argv += ["-append", spec.direct.append()]
    return argv


def resolve_firmware(spec: MachineSpec) -> tuple[MachineSpec, str]:
    """``spec`` with its firmware chosen (``auto``: from the image's partition table,
    :func:`imagelint.vm.disk.choose_firmware`; a direct kernel boot: SeaBIOS, whose option ROM starts
    the kernel QEMU loaded), and why."""
    if spec.direct is not None:
        return replace(spec, firmware="bios"), f"direct kernel boot ({spec.direct.why})"
    if spec.firmware != "auto":
        return spec, f"--firmware {spec.firmware}"
    firmware, why = choose_firmware(spec.image)
    return replace(spec, firmware=firmware), why


@contextlib.contextmanager
def booted(spec: MachineSpec) -> Iterator[Machine]:
    """The machine, booted and answering over SSH; stopped and removed on the way out."""
    fmt = image_format(spec.image)
    spec, firmware_note = resolve_firmware(spec)
    if spec.firmware == "uefi" and not OVMF.is_file():
        raise VmError(f"UEFI ({firmware_note}) needs {OVMF} (Debian: ovmf)", where=str(spec.image))
    if shutil.which(spec.qemu) is None:
        raise VmError(f"{spec.qemu} is not installed (Debian: qemu-system-x86)")
    scratch = Path(tempfile.mkdtemp(prefix="imagelint-vm-"))  # mode 0700
    machine: Machine | None = None
    failed: VmError | None = None
    stop_watch = threading.Event()
    try:
        key, public_key = make_key(scratch)
        if spec.direct is not None:
            spec.direct.stage(scratch)
        if spec.seed:
            make_seed(scratch, public_key, f"imagelint-{os.getpid()}")
        port = free_port()
        machine = Machine(spec, scratch, fmt, port, client_command(key, scratch / "known_hosts", port))
        machine.firmware_note = firmware_note
        qemu = _start(machine, public_key)
        started = machine.powered_on
        watcher = threading.Thread(target=_watch, args=(machine, qemu, stop_watch), daemon=True)
        watcher.start()
        try:
            _wait_ssh(machine, qemu, started + spec.boot_timeout)
        except VmError as exc:
            exc.accel = machine.accel  # the report says under which accelerator the boot failed
            raise
        machine.boot_seconds = time.monotonic() - started
        yield machine
        machine.check()
    except VmError as exc:
        failed = exc
        raise
    finally:
        with _held_signals():
            stop_watch.set()
            if machine is not None and machine.process is not None:
                machine.process.stop()
            if failed is not None and machine is not None:
                failed.log = machine.console_log()  # whole now: QEMU is stopped, its console read
                failed.firmware = f"{machine.spec.firmware}: {machine.firmware_note}"
            shutil.rmtree(scratch, ignore_errors=True)


def _start(machine: Machine, public_key: str) -> _Qemu:
    """QEMU under the chosen accelerator (see the module docstring)."""
    spec = machine.spec
    wanted = spec.accel
    if wanted in ("auto", "kvm"):
        if not kvm_usable():
            if wanted == "kvm":
                raise VmError("--accel kvm: /dev/kvm cannot be opened")
            machine.accel_note = "/dev/kvm cannot be opened"
        else:
            create_overlay(spec.image, machine.fmt, machine.scratch / "overlay.qcow2")
            machine.powered_on, machine.powered_on_wall = time.monotonic(), time.time()
            qemu = machine.process = _Qemu(qemu_argv(spec, "kvm", machine.scratch, machine.port, public_key))
            machine.console = qemu.console
            probe_end = time.monotonic() + spec.kvm_probe
            while qemu.proc.poll() is None and time.monotonic() < probe_end:  # a QEMU that died ends it
                if qemu.console.banner.wait(0.5):
                    break
            if qemu.console.banner.is_set() and qemu.proc.poll() is None:
                machine.accel = "kvm"
                return qemu
            code = qemu.proc.poll()
            why = qemu.said() if code is not None else ""
            qemu.stop()
            (machine.scratch / "overlay.qcow2").unlink()
            machine.accel_note = (
                f"KVM probe: QEMU exited ({code}){': ' + why if why else ''}"
                if code is not None
                else f"KVM probe: no kernel banner on the console within {spec.kvm_probe:.0f} s"
            )
            if wanted == "kvm":
                raise VmError(machine.accel_note, console=qemu.console.last())
    create_overlay(spec.image, machine.fmt, machine.scratch / "overlay.qcow2")
    machine.powered_on, machine.powered_on_wall = time.monotonic(), time.time()
    qemu = machine.process = _Qemu(qemu_argv(spec, "tcg", machine.scratch, machine.port, public_key))
    machine.console, machine.accel = qemu.console, "tcg"
    return qemu


def _watch(machine: Machine, qemu: _Qemu, stop: threading.Event) -> None:
    """Stop QEMU when the overlay outgrows its cap (checked every :data:`WATCH_EVERY` seconds)."""
    overlay = machine.scratch / "overlay.qcow2"
    while not stop.wait(WATCH_EVERY):
        if allocated(overlay) > machine.spec.overlay_limit:
            machine.limit_hit.set()
            qemu.stop()
            return


def _wait_ssh(machine: Machine, qemu: _Qemu, deadline: float) -> None:
    """Retry ``ssh ... true`` until it succeeds, then (seed offered) until cloud-init has finished
    (:data:`SETTLE`); a :class:`VmError` on a panic, QEMU's exit, the deadline."""
    _retry_ssh(machine, qemu, deadline, "true", SSH_ATTEMPT)
    if machine.spec.seed:
        _retry_ssh(machine, qemu, deadline, SETTLE, SETTLE_ATTEMPT)


def _retry_ssh(machine: Machine, qemu: _Qemu, deadline: float, command: str, longest: float) -> None:
    where = str(machine.spec.image)
    argv = [*machine.ssh, "--", "root@127.0.0.1", command]
    while True:
        machine.check()
        if qemu.console.panic:
            said = qemu.console.panic
            raise VmError(f"the guest's kernel panicked: {said}", where=where, console=qemu.console.last())
        code = qemu.proc.poll()
        if code is not None:
            said = qemu.said()
            raise VmError(
                f"QEMU exited ({code}) before SSH answered{': ' + said if said else ''}",
                where=where,
                console=qemu.console.last(),
            )
        left = deadline - time.monotonic()
        if left <= 0:
            within = f"within {machine.spec.boot_timeout:.0f} s of power-on"
            raise VmError(
                f"no SSH {within} (the key was offered by {_offered(machine.spec)})"
                if command == "true"
                else f"SSH answered, but cloud-init had not finished {within}",
                where=where,
                console=qemu.console.last(),
            )
        try:
            attempt = min(longest, left)
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=attempt)
            if done.returncode == 0:
                return
        except subprocess.TimeoutExpired:
            pass
        time.sleep(min(SSH_RETRY, max(0.0, deadline - time.monotonic())))


def _offered(spec: MachineSpec) -> str:
    ways = [
        *(["a NoCloud seed (cloud-init)"] if spec.seed else []),
        *(["the ssh.authorized_keys.root credential (systemd 252+)"] if spec.credential else []),
    ]
    return " and ".join(ways) or "no way at all"


@contextlib.contextmanager
def _held_signals() -> Iterator[None]:
    """SIGINT and SIGTERM wait while the machine is stopped and removed (the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt as SIGINT does, so the machine's cleanup runs,
    and only the first one does: Ctrl-C reaches every process of the group, the box's parent passes
    it on to the child again, and a second KeyboardInterrupt raised inside the cleanups the first
    started (the collector's ssh client being waited for) left the scratch directory behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    interrupted = False

    def handler(signum: int, frame: object) -> None:
        nonlocal interrupted
        if not interrupted:
            interrupted = True
            raise KeyboardInterrupt

    held = (signal.SIGINT, signal.SIGTERM)
    old = {number: signal.signal(number, handler) for number in held}
    try:
        yield
    finally:
        for number, previous in old.items():
            signal.signal(number, previous)
