"""Direct kernel boot: a bare filesystem image (no partition table, no bootloader) booted by its own kernel.

Some build pipelines produce a raw ext4 or XFS filesystem, not a disk: no firmware finds a bootloader
on it, and QEMU would wait in SeaBIOS until the boot deadline. For such an image (the disk opener
says its root filesystem is the whole disk: :class:`imagelint.targets.disk.open.BareFilesystem`)
QEMU loads the kernel and initrd itself (``-kernel``, ``-initrd``, ``-append``), read from the image's
``/boot`` through the same opened target as the offline audit, never from the host:

- the kernel: what ``/boot/vmlinuz`` (then ``/vmlinuz``, Debian's default place for the link) points to,
  resolved inside the image, when that is a regular file ``/boot/vmlinuz-VERSION``; a link leading
  anywhere else (``../../etc/shadow``, an absolute path out of ``/boot``) is ignored. Else the newest
  ``/boot/vmlinuz-VERSION`` (versions compared by their numbers) that has an initrd;
- its initrd: ``/boot/initrd.img-VERSION`` (Debian, Ubuntu) or ``/boot/initramfs-VERSION.img`` (Fedora,
  RHEL), a regular file in ``/boot`` once resolved;
- at most :data:`KERNEL_LIMIT` and :data:`INITRD_LIMIT` bytes, copied into the machine's private
  scratch directory;
- the command line: ``root=UUID=<the filesystem's UUID> rw console=ttyS0,115200`` (an initramfs finds
  the root by its UUID whatever the disk is named; ``rw`` so a root that ``/etc/fstab`` does not
  remount still takes writes; the console is the serial port the machine reads). The image's GRUB
  configuration is not read: a bare filesystem has no bootloader whose settings would apply.

No kernel, no initrd for it, or a file over its limit: a :class:`VmError` (one line, exit 3) before
any boot, :data:`NO_KERNEL` when ``/boot`` holds no kernel at all.
"""

from __future__ import annotations

import re
from dataclasses import field
from pathlib import Path, PurePosixPath

from imagelint.errors import ImageLintError
from imagelint.records import dataclass
from imagelint.targets.interface import FileKind, Target, human_size
from imagelint.vm import VmError

KERNEL_LIMIT = 64 << 20
INITRD_LIMIT = 512 << 20
COPY_CHUNK = 1 << 20
LINKS = ("/boot/vmlinuz", "/vmlinuz")
KERNEL = re.compile(r"vmlinuz-([A-Za-z0-9][A-Za-z0-9._+~-]{0,127})\Z")
INITRDS = ("initrd.img-{}", "initramfs-{}.img")
NO_KERNEL = "a bare filesystem image with no kernel in /boot cannot be booted"
CONSOLE = "console=ttyS0,115200"
BARE = "no partition table, a bare filesystem"


@dataclass(frozen=True)
class DirectBoot:
    """The kernel and initrd a bare filesystem image boots, as paths inside the image, and why."""

    kernel: str  # /boot/vmlinuz-VERSION
    initrd: str
    root: str  # what root= names
    why: str
    target: Target = field(compare=False, repr=False)  # the opened image they are read from

    @property
    def kernel_name(self) -> str:
        return PurePosixPath(self.kernel).name

    def append(self) -> str:
        """The kernel command line (see the module docstring)."""
        return f"root={self.root} rw {CONSOLE}"

    def stage(self, scratch: Path) -> tuple[Path, Path]:
        """The kernel and initrd copied out of the image into ``scratch`` (bounded)."""
        kernel, initrd = scratch / "kernel", scratch / "initrd"
        copy_out(self.target, self.kernel, kernel, KERNEL_LIMIT)
        copy_out(self.target, self.initrd, initrd, INITRD_LIMIT)
        return kernel, initrd

    def facts(self) -> dict[str, object]:
        return {
            "boot": "direct-kernel",
            "kernel_file": self.kernel,
            "initrd_file": self.initrd,
            "cmdline": self.append(),
            "boot_why": self.why,
        }


def version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key of a kernel version: its digit runs compared as numbers (6.1.0-10 after 6.1.0-9)."""
    return tuple((0, int(run)) if run.isdigit() else (1, run) for run in re.findall(r"\d+|\D+", version))


def plan(target: Target, uuid: str, where: str) -> DirectBoot:
    """What a bare filesystem image with the UUID ``uuid`` boots; a :class:`VmError` when nothing."""
    versions = _versions(target)
    if not versions:
        raise VmError(NO_KERNEL, where=where)
    chosen: tuple[str, str, str] | None = None
    for link in LINKS:
        version = _linked(target, link)
        if version is not None and version in versions:
            initrd = _initrd(target, version)
            if initrd is None:
                raise VmError(f"{link} leads to vmlinuz-{version}, which has no initrd in /boot", where=where)
            chosen = (version, initrd, f"{link} points to vmlinuz-{version}")
            break
    if chosen is None:
        for version in sorted(versions, key=version_key, reverse=True):
            initrd = _initrd(target, version)
            if initrd is not None:
                chosen = (version, initrd, f"vmlinuz-{version}, the newest kernel in /boot with an initrd")
                break
    if chosen is None:
        names = ", ".join(f"vmlinuz-{v}" for v in sorted(versions, key=version_key)[:4])
        raise VmError(f"no initrd in /boot for {names} (a direct kernel boot needs one)", where=where)
    version, initrd, why = chosen
    kernel = f"/boot/vmlinuz-{version}"
    for path, limit in ((kernel, KERNEL_LIMIT), (initrd, INITRD_LIMIT)):
        try:
            stat = target.stat(path)
        except ImageLintError as exc:
            raise VmError(f"cannot read {path}: {exc.message}", where=where) from None
        size = stat.size if stat is not None else 0
        if size > limit:
            raise VmError(
                f"{path} is {human_size(size)}, over the {human_size(limit)} a direct kernel boot reads",
                where=where,
            )
    return DirectBoot(kernel, initrd, f"UUID={uuid}", f"{BARE}: {why}", target)


def copy_out(target: Target, image_path: str, dest: Path, limit: int) -> None:
    """Copy a regular file of the image to ``dest`` (created 0600), at most ``limit`` bytes."""
    try:
        source = target.open_random(image_path)
    except ImageLintError as exc:
        raise VmError(f"cannot read {image_path}: {exc.message}") from None
    written = 0
    try:
        with dest.open("xb") as out:
            dest.chmod(0o600)
            while True:
                chunk = source.pread(written, COPY_CHUNK)
                if not chunk:
                    break
                written += len(chunk)
                if written > limit:
                    raise VmError(f"{image_path} is over the {human_size(limit)} a direct kernel boot reads")
                out.write(chunk)
    except OSError as exc:
        raise VmError(f"cannot copy {image_path} out of the image: {exc.strerror or exc}") from None
    finally:
        source.close()


def _versions(target: Target) -> set[str]:
    """VERSION of each regular file /boot/vmlinuz-VERSION."""
    try:
        kinds = target.list_kinds("/boot", limit=4096) or {}
    except ImageLintError:
        return set()
    found = set()
    for name in kinds:
        match = KERNEL.match(name)
        if match and _in_boot(target, f"/boot/{name}") == f"/boot/{name}":
            found.add(match.group(1))
    return found


def _linked(target: Target, link: str) -> str | None:
    """The VERSION of the /boot/vmlinuz-VERSION ``link`` leads to inside the image, or None."""
    resolved = _in_boot(target, link)
    if resolved is None:
        return None
    match = KERNEL.match(PurePosixPath(resolved).name)
    return match.group(1) if match else None


def _initrd(target: Target, version: str) -> str | None:
    for pattern in INITRDS:
        path = f"/boot/{pattern.format(version)}"
        if _in_boot(target, path) is not None:
            return path
    return None


def _in_boot(target: Target, path: str) -> str | None:
    """``path`` resolved inside the image when that is a regular file directly in /boot, else None."""
    try:
        resolved = target.resolve(path)
        stat = target.stat(path)
    except ImageLintError:
        return None
    if stat is None or stat.kind is not FileKind.FILE or str(PurePosixPath(resolved).parent) != "/boot":
        return None
    return resolved
