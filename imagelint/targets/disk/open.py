"""Opening a disk image: its container, its volumes, the root filesystem and the fstab mounts.

The root is the one filesystem that has ``/etc/os-release`` (or ``/usr/lib/os-release``), or else
both ``/etc`` and ``/usr``; several such filesystems need ``--partition N`` (the partition number in
the table; for LVM, the partition holding the physical volume). Every failure is a
:class:`DiskImageError` (one line, exit 3).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from imagelint.errors import ImageDamageError, ImageReadError
from imagelint.records import dataclass
from imagelint.targets.disk.containers import Guarded, bound_grains, check_container
from imagelint.targets.disk.errors import DiskImageError, NoRootFilesystem, require_dissect
from imagelint.targets.disk.filesystems import Filesystem, open_filesystem
from imagelint.targets.disk.mounts import FstabEntry, MountTable, match_volume, parse_fstab, wanted
from imagelint.targets.disk.prefetch import DiskHints, disk_hints
from imagelint.targets.disk.probe import (
    LUKS,
    QCOW2,
    RAW,
    READABLE,
    VHD,
    VHDX,
    VMDK,
    container_format,
    stream_size,
)
from imagelint.targets.disk.volumes import Layout, Volume, find_volumes, volume_size
from imagelint.targets.resolver import ResolvingTarget

_ROOT_MARKERS = ("/etc/os-release", "/usr/lib/os-release")
Opened = list[tuple[Volume, Filesystem | None]]
MAX_FSTAB_BYTES = 1024 * 1024


@dataclass(frozen=True)
class BareFilesystem:
    """The root filesystem when it is the whole disk: no partition table, no LVM (what some build
    pipelines produce). Nothing on such a disk boots it: no firmware finds a bootloader there."""

    fstype: str  # "ext4" or "xfs"
    uuid: str  # the filesystem's UUID, as ``root=UUID=`` names it


class DiskTarget(ResolvingTarget):
    """A disk image read in place: the resolver over the image's mount table."""

    bare: BareFilesystem | None = None  # set by :func:`open_disk_target` for a whole-disk filesystem

    def __init__(
        self, table: MountTable, description: str, kind: str, facts: dict[str, Any], stream: Any
    ) -> None:
        super().__init__(table)
        self.kind = kind
        self._description = description
        self._facts = facts
        self._stream = stream

    def __repr__(self) -> str:
        return f"DiskTarget({self._description!r})"

    @property
    def description(self) -> str:
        return self._description

    def facts(self) -> dict[str, object]:
        disk = dict(self._facts)
        stats = getattr(self._stream, "stats", None)
        if callable(stats):
            disk["io"] = dict(stats())
        return {"disk": disk}


def is_disk_image(path: str | os.PathLike[str]) -> bool:
    """A regular file (an image to open as a disk), as opposed to a directory tree."""
    return os.path.isfile(path)


def _not_a_file(mode: int) -> str | None:
    """What a non-regular file is, for the refusal; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    kinds = (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISDIR, "a directory"),
    )
    for test, name in kinds:
        if test(mode):
            return name
    return "not a regular file"


def refuse_special(where: str, mode: int) -> None:
    """A device node, FIFO or socket named as the image: refused (reading one may hang or read the host)."""
    what = _not_a_file(mode)
    if what is not None:
        raise DiskImageError(
            f"is {what}, not a disk image file; imagelint reads regular files only", where=where
        )


def open_image_file(where: str) -> BinaryIO:
    """The named file opened for reading, refused unless it is a regular file: stat first (a FIFO is
    never opened), then opened without blocking, then fstat (it was not swapped for another kind)."""
    try:
        refuse_special(where, os.stat(where).st_mode)
        fd = os.open(where, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise DiskImageError(f"cannot open: {exc.strerror}", where=where) from None
    try:
        refuse_special(where, os.fstat(fd).st_mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    fh = open(fd, "rb")  # noqa: SIM115 (the target keeps it open)
    # dissect looks for parent and extent files beside a handle's name: it is given none
    fh.raw.name = ""  # type: ignore[attr-defined]
    return fh


def open_disk_file(path: str | os.PathLike[str], *, partition: int | None = None) -> DiskTarget:
    """Open a disk image file (raw, qcow2, vmdk, vhd, vhdx: found by content, not by extension).

    Only that file is opened: a container that needs another one (a parent, backing or extent
    file) is refused, as is anything but a regular file (:mod:`.containers`)."""
    require_dissect()
    where = os.fspath(path)
    fh = open_image_file(where)
    fmt = container_format(fh)
    disk = _open_container(fmt, fh, where)
    return open_disk_target(disk, description=where, partition=partition, container=fmt)


@contextlib.contextmanager
def raw_disk(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """The raw disk a disk image file holds (its container read as :func:`open_disk_file` reads it),
    for what reads the disk itself rather than its filesystems; the file is closed on the way out."""
    require_dissect()
    where = os.fspath(path)
    fh = open_image_file(where)
    try:
        yield _open_container(container_format(fh), fh, where)
    finally:
        fh.close()


def _open_container(fmt: str, fh: BinaryIO, where: str) -> Any:
    if fmt == RAW:
        return fh
    check_container(fmt, fh, where)
    fh.seek(0)  # sniffing moved it (a fixed VHD's footer is at the end)
    try:
        if fmt == QCOW2:
            from dissect.hypervisor.disk.qcow2 import QCow2

            return Guarded(QCow2(fh).open(), fmt, where)  # a handle, not a path: no file looked for beside it
        if fmt == VMDK:
            from dissect.hypervisor.disk.vmdk import VMDK as VMDKReader

            return Guarded(bound_grains(VMDKReader(fh), where), fmt, where)
        if fmt == VHDX:
            from dissect.hypervisor.disk.vhdx import VHDX as VHDXReader

            return Guarded(VHDXReader(fh), fmt, where)
        if fmt == VHD:
            from dissect.hypervisor.disk.vhd import VHD as VHDReader

            return Guarded(VHDReader(fh), fmt, where)
    except Exception as exc:
        raise DiskImageError(
            f"{fmt}: corrupt or truncated container ({type(exc).__name__}: {exc})", where=where
        ) from None
    raise AssertionError(fmt)


def open_disk_target(
    stream: BinaryIO,
    *,
    description: str,
    kind: str = "disk",
    partition: int | None = None,
    container: str = RAW,
) -> DiskTarget:
    """A target over a seekable, read-only stream of a raw disk (``read``/``seek``/``tell``, maybe ``size``).

    If the stream has a ``stats()`` method returning a dict, its counters are reported under
    ``facts["disk"]["io"]`` of the report (read when the report is made, so they cover the audit).
    If it has a ``prefetch(ranges)`` method (:class:`~imagelint.targets.disk.prefetch.Prefetching`),
    the filesystems on it give it read hints (:mod:`imagelint.targets.disk.prefetch`).
    """
    require_dissect()
    where = description
    disk = read_disk(stream, where, partition)
    root_volume, root_fs = pick_root(disk.selected, where)
    table = MountTable(root_fs)
    facts: dict[str, Any] = {
        "container": container,
        "partition_table": disk.layout.table,
        "volumes": [{"volume": v.label, "content": v.content or "unrecognised"} for v in disk.layout.volumes],
        "root": {"volume": root_volume.label, "partition": root_volume.number, "filesystem": root_fs.fstype},
        "mounts": [],
    }
    target = DiskTarget(table, description, kind, facts, stream)
    if disk.layout.table == "none" and root_volume.label == "disk":
        target.bare = BareFilesystem(root_fs.fstype, root_fs.uuid)
    mount_fstab(target, table, disk.every(), root_volume, facts, where)
    return target


@dataclass
class DiskRead:
    """A raw disk's volumes, with the filesystems of those ``--partition`` selected opened."""

    layout: Layout
    selected: Opened
    hints: DiskHints | None
    where: str

    def every(self) -> Opened:
        """Every volume with its filesystem (the selected ones as opened already)."""
        known = {id(v): fs for v, fs in self.selected}
        return [
            (v, known[id(v)] if id(v) in known else _open(v, self.where, self.hints))
            for v in self.layout.volumes
        ]


def read_disk(stream: BinaryIO, where: str, partition: int | None = None) -> DiskRead:
    """The volumes of a raw disk stream, checked against its size, and the filesystems of those
    ``partition`` selects (every volume without it) opened."""
    size = stream_size(stream)
    if size < 512:
        raise DiskImageError(f"too small to be a disk image ({size} bytes)", where=where)
    layout = find_volumes(stream, where)
    _check_extents(layout, size, where)
    volumes = [v for v in layout.volumes if partition is None or v.number == partition]
    if partition is not None and not volumes:
        known = sorted({v.number for v in layout.volumes if v.number is not None})
        raise DiskImageError(
            f"--partition {partition}: no such partition (the table has {known})", where=where
        )
    hints = disk_hints(stream)
    return DiskRead(layout, [(v, _open(v, where, hints)) for v in volumes], hints, where)


def _check_extents(layout: Layout, size: int, where: str) -> None:
    """A partition reaching past the end of the image: the image was truncated."""
    for v in layout.volumes:
        end = getattr(v.stream, "offset", 0) + (getattr(v.stream, "size", 0) or 0)
        if v.number is not None and not v.devices and end > size:
            raise DiskImageError(
                f"truncated: {v.label} ends at byte {end} but the image has {size}", where=where
            )


def _open(volume: Volume, where: str, hints: DiskHints | None) -> Filesystem | None:
    """The filesystem on a volume, or None when it holds none imagelint reads (EFI, swap, unknown)."""
    if volume.content not in READABLE:
        return None
    return open_filesystem(
        volume.content,
        volume.stream,
        volume_size(volume),
        f"{where}: {volume.label}",
        None if hints is None else hints.within(volume.offset),
    )


def _is_root(volume: Volume, fs: Filesystem, where: str) -> bool:
    try:
        return _has_root_markers(fs)
    except OSError as exc:
        raise DiskImageError(
            f"{volume.label}: the {fs.fstype} filesystem is unreadable: {exc.strerror or exc}", where=where
        ) from None


def _has_root_markers(fs: Filesystem) -> bool:
    if any(fs.lstat(tuple(m.strip("/").split("/"))) is not None for m in _ROOT_MARKERS):
        return True
    return fs.lstat(("etc",)) is not None and fs.lstat(("usr",)) is not None


def pick_root(opened: Opened, where: str) -> tuple[Volume, Filesystem]:
    """The one root filesystem among the volumes (one line naming what was found when there is none)."""
    candidates = [(v, fs) for v, fs in opened if fs is not None and _is_root(v, fs, where)]
    if len(candidates) == 1:
        return candidates[0]
    if len(candidates) > 1:
        names = ", ".join(v.label for v, _ in candidates)
        raise DiskImageError(f"several root filesystems ({names}): pick one with --partition N", where=where)
    encrypted = [v.label for v, _ in opened if v.content == LUKS]
    if encrypted:
        raise DiskImageError(
            f"{', '.join(encrypted)} is encrypted (LUKS); imagelint does not decrypt: audit the image "
            "before encryption, or its opened device mounted",
            where=where,
        )
    found = ", ".join(f"{v.label}: {v.content or 'unrecognised'}" for v, _ in opened) or "no volumes"
    readable = [v for v, fs in opened if fs is not None]
    if not readable:
        raise DiskImageError(
            f"unsupported or unrecognised filesystem ({found}); imagelint reads ext4 and XFS", where=where
        )
    raise NoRootFilesystem(
        f"no root filesystem (none has /etc/os-release or /etc and /usr) among {found}", where=where
    )


# Which volume an fstab entry names, or the status to record when none of them is it (raising
# DiskImageError instead ends the run: a mount that boot makes and the audit cannot see).
FindVolume = Callable[[FstabEntry, Opened], "Volume | str"]
TMPFS_STATUS = "tmpfs: memory at boot, not image content"


def find_in_image(entry: FstabEntry, opened: Opened) -> Volume | str:
    """One disk image: an entry it does not hold names a data volume attached at run time."""
    return match_volume(entry.spec, opened) or "not in this image"


def mount_fstab(
    target: DiskTarget,
    table: MountTable,
    opened: Opened,
    root_volume: Volume,
    facts: dict[str, Any],
    where: str,
    find: FindVolume = find_in_image,
) -> None:
    """Mount what the root's /etc/fstab mounts at boot, in file order, each at its path inside the image.
    tmpfs entries are recorded (their content is made at boot), as is every entry no volume matched."""
    try:
        if target.stat("/etc/fstab") is None:
            return
        text = target.read_text("/etc/fstab", limit=MAX_FSTAB_BYTES).text
    except (ImageReadError, ImageDamageError) as exc:  # a mount it names could hide what the audit must see
        raise DiskImageError(f"cannot read the root's /etc/fstab: {exc.reason}", where=where) from None
    for entry in parse_fstab(text):
        if entry.fstype == "tmpfs" and entry.mountpoint.startswith("/"):
            tmpfs = {"mountpoint": entry.mountpoint, "device": entry.spec, "status": TMPFS_STATUS}
            facts["mounts"].append(tmpfs)
            continue
        if not wanted(entry):
            continue
        volume = find(entry, opened)
        record: dict[str, Any] = {"mountpoint": entry.mountpoint, "device": entry.spec}
        facts["mounts"].append(record)
        if isinstance(volume, str):
            record["status"] = volume
            continue
        if volume is root_volume:
            record["status"] = "the root filesystem"
            continue
        fs = next((f for v, f in opened if v is volume), None)
        if fs is None:
            if volume.content == LUKS:
                raise DiskImageError(
                    f"{entry.mountpoint} is on {volume.label}, encrypted (LUKS); imagelint does not decrypt",
                    where=where,
                )
            raise DiskImageError(
                f"{entry.mountpoint} is on {volume.label} ({volume.content or 'unrecognised'}), "
                "a filesystem imagelint does not read",
                where=where,
            )
        mountpoint = target.resolve(entry.mountpoint)  # resolved inside the image, as mount(8) would
        table.mount(tuple(p for p in mountpoint.split("/") if p), fs)
        target._prefixes.clear()
        record.update(status="mounted", volume=volume.label, filesystem=fs.fstype)
