"""Several disks of one machine as one target: the boot disk's root filesystem, and what its
``/etc/fstab`` mounts from any of the disks, as the machine's boot would mount it.

The caller gives each disk (:class:`Disk`) its stream and the kernel names fstab may use for it
(``/dev/sdb``, ``/dev/xvdb``; a partition is such a name with its number appended, ``/dev/xvdb1``),
or says why it has no stream: it could not be read (``unreadable``), or its content is not the
image's (``blank``: an instance-store disk, empty at each boot). An EBS snapshot reader hands over
an AMI's disks this way (:mod:`imagelint.aws.machine`); nothing here knows where streams come from.

The disks given are all the machine has at boot. So, unlike one disk image, whose fstab may name a
data volume attached later, a mount that boot makes and the audit cannot see ends the run
(:class:`~imagelint.targets.disk.errors.DiskImageError`, one line naming the mount point, exit 3):
the empty mount-point directory is never audited in place of its content. For each fstab entry
that mounts a filesystem (not swap, pseudo or network filesystems, not ``noauto``):

- its device is a volume read: mounted there (by ``UUID=``, ``LABEL=``, ``PARTUUID=``,
  ``PARTLABEL=``, ``/dev/disk/by-*`` links, LVM paths, or a disk's kernel names);
- it is on a disk that could not be read, or may be (a ``UUID=`` found on no disk read while a
  disk could not be read): inconclusive, with that disk's reason;
- it is a ``/dev/nvme*`` name and there are several disks: inconclusive, since NVMe names are given
  in the order devices are found, which is not guaranteed (with one disk, it is that disk);
- it is on a blank disk: recorded, not read (its content is made after boot);
- it is on no disk: with ``nofail``, boot goes on without it, so it is recorded as absent and the
  directory beneath is what the machine has; without ``nofail`` the boot would stop there (an
  emergency shell), so the run is inconclusive.

A disk that could not be read and that no mount needs is recorded and does not stop the run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import field
from typing import Any, BinaryIO

from imagelint.records import dataclass
from imagelint.targets.disk.errors import DiskImageError, require_dissect, shown
from imagelint.targets.disk.mounts import FstabEntry, MountTable, match_volume
from imagelint.targets.disk.open import DiskRead, DiskTarget, Opened, mount_fstab, pick_root, read_disk
from imagelint.targets.disk.volumes import Volume

_NVME = re.compile(r"^/dev/nvme\d+n\d+(?:p(\d+))?$")


@dataclass
class Disk:
    """One disk of the machine: a stream to read, or why there is none."""

    label: str  # how reports name it: "/dev/xvdb (snap-0123…)"
    stream: BinaryIO | None = None
    names: tuple[str, ...] = ()  # the kernel names fstab may give the whole disk
    unreadable: str | None = None  # why it could not be read
    blank: str | None = None  # why its content is not the image's (an instance-store disk)
    facts: dict[str, Any] = field(default_factory=dict)  # the caller's, reported with the disk


def open_disks(
    disks: Sequence[Disk],
    *,
    description: str,
    kind: str = "disk",
    root: int = 0,
    partition: int | None = None,
) -> DiskTarget:
    """The machine's disks as one target; ``root``: the index of the boot disk, whose root filesystem
    is found as a disk image's is (``partition`` picks it among several)."""
    require_dissect()
    boot = disks[root]
    if boot.stream is None:
        raise DiskImageError(
            f"the boot disk {boot.label} could not be read: {boot.unreadable}", where=description
        )
    read: list[DiskRead | None] = []
    for index, disk in enumerate(disks):
        read.append(_read(disk, index == root, partition))
    root_read = read[root]
    assert root_read is not None
    root_volume, root_fs = pick_root(root_read.selected, root_read.where)
    table = MountTable(root_fs)
    opened: Opened = [pair for r in read if r is not None for pair in r.every()]
    facts: dict[str, Any] = {
        "container": "raw",
        "partition_table": root_read.layout.table,
        "volumes": [
            {"volume": v.label, "content": v.content or "unrecognised"}
            for r in read
            if r is not None
            for v in r.layout.volumes
        ],
        "root": {"volume": root_volume.label, "partition": root_volume.number, "filesystem": root_fs.fstype},
        "disks": [_disk_facts(d) for d in disks],
        "mounts": [],
    }
    target = DiskTarget(table, description, kind, facts, _Streams([d.stream for d in disks if d.stream]))
    mount_fstab(target, table, opened, root_volume, facts, description, _Finder(disks, description).find)
    return target


def _read(disk: Disk, is_root: bool, partition: int | None) -> DiskRead | None:
    """The disk's volumes, named after the disk; None when it has no stream or (not the boot disk)
    cannot be read, with the reason kept on the disk."""
    if disk.stream is None:
        return None
    try:
        read = read_disk(disk.stream, disk.label, partition if is_root else None)
    except (OSError, DiskImageError) as exc:
        if is_root:
            raise
        disk.unreadable = str(exc)
        disk.stream = None
        return None
    for volume in read.layout.volumes:
        _name(volume, disk)
    return read


def _name(volume: Volume, disk: Disk) -> None:
    """The disk's label in the volume's, and the kernel names of the volume among its devices."""
    if volume.devices:  # an LVM logical volume: named by its VG and LV, whatever the disk
        volume.label = f"{disk.label} {volume.label}"
        return
    if volume.number is None:  # the filesystem on the whole disk
        volume.devices = list(disk.names)
    else:
        volume.devices = [f"{name}{volume.number}" for name in disk.names]
    volume.label = f"{disk.label} {volume.label}"


def _disk_facts(disk: Disk) -> dict[str, Any]:
    status = "read" if disk.stream is not None else "blank" if disk.blank else "unreadable"
    out: dict[str, Any] = {"disk": disk.label, "names": list(disk.names), "status": status, **disk.facts}
    reason = disk.blank or disk.unreadable
    if reason and disk.stream is None:
        out["reason"] = reason
    return out


class _Finder:
    """Which volume an fstab entry names among the disks read, or why the run cannot go on."""

    def __init__(self, disks: Sequence[Disk], where: str) -> None:
        self.disks = disks
        self.where = where

    def _stop(self, entry: FstabEntry, why: str) -> DiskImageError:
        return DiskImageError(
            f"{shown(entry.mountpoint)} ({shown(entry.spec)}) is mounted at boot but {why}; "
            "its mount-point directory is not its content",
            where=self.where,
        )

    def _disk_named(self, spec: str) -> Disk | None:
        for disk in self.disks:
            if any(spec == name or re.fullmatch(re.escape(name) + r"\d+", spec) for name in disk.names):
                return disk
        return None

    def find(self, entry: FstabEntry, opened: Opened) -> Volume | str:
        volume = match_volume(entry.spec, opened)
        if volume is not None:
            return volume
        nvme = _NVME.match(entry.spec)
        if nvme:
            return self._nvme(entry, nvme.group(1), opened)
        disk = self._disk_named(entry.spec)
        if disk is not None and disk.blank:
            return f"on {disk.label}: {disk.blank}"
        if disk is not None and disk.stream is None:
            raise self._stop(entry, f"its disk {disk.label} could not be read: {disk.unreadable}")
        if disk is not None:
            raise self._stop(entry, f"{disk.label} has no such volume")
        unread = [d for d in self.disks if d.stream is None and not d.blank]
        by_content = "=" in entry.spec or entry.spec.startswith("/dev/disk/by-")
        if unread and by_content:
            d = unread[0]
            raise self._stop(entry, f"no disk read holds it, and {d.label} could not be read: {d.unreadable}")
        if "nofail" in entry.options:
            return "absent (nofail: the boot goes on without it)"
        raise self._stop(entry, "none of the machine's disks holds it (and it is not nofail)")

    def _nvme(self, entry: FstabEntry, number: str | None, opened: Opened) -> Volume | str:
        """One disk: the name is that disk's (the boot disk, always read); several: no telling which."""
        if len(self.disks) > 1:
            raise self._stop(
                entry,
                f"with {len(self.disks)} disks an NVMe name cannot be matched reliably (NVMe devices are "
                "named in the order they are found, which is not guaranteed): name it by UUID= or LABEL=",
            )
        wanted = None if number is None else int(number)
        for volume, _fs in opened:
            if volume.number == wanted and (wanted is not None or volume.label.endswith(" disk")):
                return volume
        raise self._stop(entry, f"{self.disks[0].label} has no such volume")


class _Streams:
    """The counters of every disk's stream, summed (``facts["disk"]["io"]``); per disk in ``disks``."""

    _SAME = ("block_size", "concurrency")  # the rest add up (cache_bytes: the budget of them all)

    def __init__(self, streams: list[BinaryIO]) -> None:
        self.streams = streams

    def stats(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for stream in self.streams:
            stats = getattr(stream, "stats", None)
            if not callable(stats):
                continue
            for key, value in dict(stats()).items():
                total[key] = value if key in self._SAME else total.get(key, 0) + value
        return total
