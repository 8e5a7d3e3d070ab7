"""The image's mount table: the root filesystem plus what its ``/etc/fstab`` mounts, as one backend.

fstab entries name a device by ``UUID=``, ``LABEL=``, ``PARTUUID=``, ``PARTLABEL=``, a
``/dev/disk/by-*/`` link, an LVM path, or a kernel name (``/dev/sda2``, ``/dev/nvme0n1p2``,
``/dev/xvda1``: matched by partition number). Entries for swap, pseudo filesystems, network
filesystems and ``noauto`` are skipped; an entry whose device is not in the image (a data volume
attached at run time) is recorded as such and does not stop the audit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from imagelint.records import dataclass
from imagelint.targets.disk.filesystems import Filesystem
from imagelint.targets.disk.volumes import Volume
from imagelint.targets.interface import FileKind, ImageStat, RandomAccessFile

Parts = tuple[str, ...]
MAX_FSTAB_ENTRIES = 256
_SKIP_TYPES = {
    "swap", "proc", "sysfs", "tmpfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "securityfs",
    "debugfs", "tracefs", "hugetlbfs", "mqueue", "efivarfs", "nfs", "nfs4", "cifs", "smbfs",
    "fuse", "overlay", "none", "iso9660", "udf", "bpf", "pstore", "configfs", "autofs",
}  # fmt: skip
_KERNEL_NAME = re.compile(r"^/dev/(?:[shvx]d[a-z]+|nvme\d+n\d+p|mmcblk\d+p|loop\d+p)(\d+)$")


@dataclass(frozen=True)
class FstabEntry:
    spec: str
    mountpoint: str
    fstype: str
    options: tuple[str, ...]


def parse_fstab(text: str) -> list[FstabEntry]:
    """The entries of an fstab, in file order (octal escapes such as ``\\040`` decoded)."""
    out: list[FstabEntry] = []
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) < 2:
            continue
        spec, mountpoint = (_unescape(f) for f in fields[:2])
        fstype = fields[2] if len(fields) > 2 else "auto"
        options = tuple(fields[3].split(",")) if len(fields) > 3 else ()
        out.append(FstabEntry(spec, mountpoint, fstype, options))
        if len(out) >= MAX_FSTAB_ENTRIES:
            break
    return out


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def wanted(entry: FstabEntry) -> bool:
    """An entry that mounts a filesystem of this image at boot (not swap, pseudo, network, noauto)."""
    if entry.fstype in _SKIP_TYPES or "noauto" in entry.options or "bind" in entry.options:
        return False
    return entry.mountpoint.startswith("/") and entry.mountpoint.strip("/") != ""


def match_volume(spec: str, volumes: list[tuple[Volume, Filesystem | None]]) -> Volume | None:
    """The volume an fstab device spec names, if it is in this image."""
    key, _, value = spec.partition("=")
    by_link = re.match(r"^/dev/disk/by-(uuid|label|partuuid|partlabel)/(.+)$", spec)
    if by_link:
        key, value = by_link.group(1).upper(), by_link.group(2)
    elif "=" not in spec:
        key, value = "", spec
    value = value.strip('"')
    for volume, fs in volumes:
        if key == "UUID" and fs is not None and fs.uuid.lower() == value.lower():
            return volume
        if key == "LABEL" and fs is not None and fs.label and fs.label == value:
            return volume
        if key == "PARTUUID" and volume.partuuid and volume.partuuid.lower() == value.lower():
            return volume
        if key == "PARTLABEL" and volume.partlabel == value:
            return volume
        if key == "" and value in volume.devices:
            return volume
    kernel = _KERNEL_NAME.match(spec)
    if key == "" and kernel:
        number = int(kernel.group(1))
        for volume, _fs in volumes:
            if volume.number == number and not volume.devices:
                return volume
    return None


class MountTable:
    """The resolver backend of a disk image: each path goes to the filesystem mounted deepest above it."""

    def __init__(self, root: Filesystem) -> None:
        self._mounts: list[tuple[Parts, Filesystem]] = [((), root)]

    def mount(self, mountpoint: Parts, fs: Filesystem) -> None:
        self._mounts.append((mountpoint, fs))
        self._mounts.sort(key=lambda m: len(m[0]), reverse=True)

    def _route(self, parts: Parts) -> tuple[Filesystem, Parts]:
        for point, fs in self._mounts:
            if parts[: len(point)] == point:
                return fs, parts[len(point) :]
        raise AssertionError("the root is always mounted")

    def lstat(self, parts: Parts) -> ImageStat | None:
        fs, rest = self._route(parts)
        return fs.lstat(rest)

    def prefetch_dirs(self, dirs: Sequence[Parts]) -> None:
        """Read hints for directories about to be listed, each to the filesystem that holds it."""
        routed: dict[int, tuple[Filesystem, list[Parts]]] = {}
        for parts in dirs:
            fs, rest = self._route(parts)
            routed.setdefault(id(fs), (fs, []))[1].append(rest)
        for fs, rests in routed.values():
            fs.prefetch_dirs(rests)

    def readlink(self, parts: Parts) -> str:
        fs, rest = self._route(parts)
        return fs.readlink(rest)

    def scan(self, parts: Parts, limit: int, image_dir: str) -> list[tuple[str, ImageStat]] | None:
        fs, rest = self._route(parts)
        return fs.scan(rest, limit, image_dir)

    def kinds(self, parts: Parts, limit: int) -> dict[str, FileKind] | None:
        fs, rest = self._route(parts)
        return fs.kinds(rest, limit)

    def open(self, parts: Parts) -> RandomAccessFile:
        fs, rest = self._route(parts)
        return fs.open(rest)
