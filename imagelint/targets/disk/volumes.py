"""The volumes of a raw disk: the whole disk, its GPT or MBR partitions, and LVM logical volumes on them.

Each :class:`Volume` says what it holds (by superblock magic, :mod:`.probe`) and the names fstab may
use for it (partition number, PARTUUID, PARTLABEL, LVM device paths). Partition tables and LVM
metadata are read by dissect.volume, once :mod:`.tables` has checked their counts. Only GPT and MBR
are read (an Apple or BSD label holds no filesystem imagelint reads).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, BinaryIO

from imagelint.records import dataclass
from imagelint.targets.disk.errors import DiskImageError
from imagelint.targets.disk.probe import LVM, stream_size, volume_content
from imagelint.targets.disk.tables import check_lvm, check_partition_table

MAX_VOLUMES = 256


@dataclass
class Volume:
    """One place a filesystem may live."""

    label: str  # how reports name it: "disk", "partition 2", "LVM vg0/root"
    stream: BinaryIO
    content: str | None
    number: int | None = None  # partition number in the table (the PV's for a logical volume)
    partuuid: str | None = None
    partlabel: str | None = None
    devices: list[str] = field(default_factory=list)  # /dev/mapper/VG-LV, /dev/VG/LV
    offset: int | None = None  # where it starts on the disk, when it is one plain slice of it (not LVM)


def volume_size(volume: Volume) -> int:
    """The size of a volume's stream (a partition's from the table, an LV's from its segments)."""
    size = getattr(volume.stream, "size", None)
    return size if isinstance(size, int) else stream_size(volume.stream)


@dataclass
class Layout:
    table: str  # "gpt", "mbr", "none"
    volumes: list[Volume]


def _lvm_volumes(stream: BinaryIO, where: str, number: int | None) -> list[Volume]:
    from dissect.volume.lvm import LVM2

    check_lvm(stream, stream_size(stream), where)
    try:
        lvm = LVM2(stream)
        vg = lvm.volume_group
        out = []
        for lv in vg.lv:
            if not lv.is_visible:
                continue
            s = lv.open()
            vgname, lvname = vg.name, lv.name
            out.append(
                Volume(
                    f"LVM {vgname}/{lvname}",
                    s,
                    volume_content(s),
                    number=number,
                    devices=[
                        f"/dev/mapper/{vgname.replace('-', '--')}-{lvname.replace('-', '--')}",
                        f"/dev/{vgname}/{lvname}",
                    ],
                )
            )
        return out
    except Exception as exc:
        raise DiskImageError(
            f"LVM metadata could not be read ({type(exc).__name__}: {exc})", where=where
        ) from None


def find_volumes(disk: BinaryIO, where: str) -> Layout:
    """Every volume of a raw disk; DiskImageError when nothing on it is recognised."""
    whole = volume_content(disk)
    if whole == LVM:
        return Layout("none", _lvm_volumes(disk, where, None))
    if whole is not None:
        return Layout("none", [Volume("disk", disk, whole, offset=0)])
    from dissect.volume.disk.schemes import GPT, MBR

    kind = check_partition_table(disk, stream_size(disk), where)
    if kind is None:
        raise DiskImageError(
            "no partition table (GPT or MBR) or filesystem recognised: unknown, corrupt or truncated",
            where=where,
        )
    try:
        disk.seek(0)
        scheme: Any = GPT(disk) if kind == "gpt" else MBR(disk)
        partitions = scheme.partitions
    except Exception as exc:
        raise DiskImageError(
            f"corrupt {kind.upper()} partition table ({type(exc).__name__}: {exc})", where=where
        ) from None
    volumes: list[Volume] = []
    signature = getattr(getattr(scheme, "mbr", None), "vol_no", None)
    for part in partitions[:MAX_VOLUMES]:
        if not part.size or part.type in (0x05, 0x0F, 0x85, 0xEE):  # extended containers, protective MBR
            continue
        stream = part.open()
        if kind == "gpt" and hasattr(part.raw, "last_lba"):  # not a hybrid MBR's entry
            # a GPT entry's last LBA is inclusive (dissect.volume 3.18 counts one sector short)
            from dissect.util.stream import RangeStream

            size = (part.raw.last_lba - part.raw.first_lba + 1) * scheme.sector_size
            stream = RangeStream(disk, part.offset, size)
        try:
            content = volume_content(stream)
        except Exception:
            content = None
        number = int(part.number)
        if kind == "gpt":
            partuuid = str(part.guid).lower() if part.guid else None
            partlabel = part.name or None
        else:
            partuuid = f"{signature:08x}-{number:02x}" if signature is not None else None
            partlabel = None
        if content == LVM:
            volumes += _lvm_volumes(stream, f"{where}: partition {number}", number)
            continue
        volumes.append(
            Volume(
                f"partition {number}", stream, content, number, partuuid, partlabel, offset=int(part.offset)
            )
        )
    return Layout(kind, volumes)
