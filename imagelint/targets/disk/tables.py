"""Partition tables (MBR, GPT) and LVM physical volume headers, checked before dissect.volume reads them.

dissect.volume loops over what the headers say: every entry of a GPT's ``partition_table_count``
(0xFFFFFFFF entries of size 0 is four billion reads of one sector), every extended entry of every
EBR (a tree of them is exponential), descriptor lists until an all-zero one, an LVM metadata text of
whatever size its location claims. Each count is checked here against the volume and a fixed cap;
what does not fit is corruption, one :class:`DiskImageError` line naming the field.
"""

from __future__ import annotations

import struct
from typing import Any, BinaryIO

from imagelint.targets.disk.errors import DiskImageError
from imagelint.targets.disk.probe import read_at

SECTOR = 512
MAX_EBRS = 128  # extended boot records followed (Linux reads at most 4 primary + 60 logical partitions)
MAX_GPT_BYTES = 1 << 20  # of partition entries (the usual 128 x 128 bytes is 16 KiB)
MAX_LVM_LOCATIONS = 8  # data or metadata area descriptors of one PV
MAX_LVM_METADATA = 16 << 20  # of metadata text (LVM's default area is 1 MiB)
_MBR_ENTRY = struct.Struct("<B3xB3xII")  # status, type, first sector, sectors
_EXTENDED = (0x05, 0x0F, 0x85)
_GPT = struct.Struct("<8sIIIIQQQQ16sQIII")
_LOCATION = struct.Struct("<QQ")
_MDA = struct.Struct("<I16sIQQ")
_RAW_LOCATION = struct.Struct("<QQII")


def _corrupt(what: str, where: str) -> DiskImageError:
    return DiskImageError(f"corrupt {what}", where=where)


def _entries(sector: bytes) -> list[tuple[int, int, int]]:
    """(type, first sector, sectors) of the four entries of an MBR or EBR."""
    out = []
    for i in range(4):
        _status, ptype, first, count = _MBR_ENTRY.unpack_from(sector, 446 + 16 * i)
        out.append((ptype, first, count))
    return out


def check_partition_table(disk: BinaryIO, size: int, where: str) -> str | None:
    """'gpt' or 'mbr' when sector 0 holds a table whose counts fit (None when it holds none);
    DiskImageError when the table is there but its counts do not fit the disk."""
    mbr = read_at(disk, 0, SECTOR)
    if len(mbr) < SECTOR or mbr[510:512] != b"\x55\xaa":
        return None
    _check_ebrs(disk, mbr, where)
    protective = [e for e in _entries(mbr) if e[0] == 0xEE]
    if not protective:
        return "mbr"
    header_at = protective[0][1] * SECTOR
    raw = read_at(disk, header_at, SECTOR)
    if len(raw) < _GPT.size or raw[:8] != b"EFI PART":
        raise _corrupt(f"GPT: no GPT header at byte {header_at} behind the protective MBR", where)
    fields = _GPT.unpack_from(raw)
    array_lba, count, entry_size = fields[10], fields[11], fields[12]
    if entry_size < 128 or entry_size % 8:
        raise _corrupt(f"GPT: partition_entry_size {entry_size} (128 or more, a multiple of 8)", where)
    if count * entry_size > MAX_GPT_BYTES or array_lba * SECTOR + count * entry_size > size:
        raise _corrupt(
            f"GPT: partition_table_count {count} of {entry_size} bytes at LBA {array_lba} does not fit "
            f"the {size}-byte disk (or the {MAX_GPT_BYTES}-byte cap)",
            where,
        )
    return "gpt"


def _check_ebrs(disk: BinaryIO, mbr: bytes, where: str) -> None:
    """Walk the extended boot records as dissect will (every extended entry of every record, offsets
    relative to the first one) and refuse a walk longer than ``MAX_EBRS``: a loop or a fan-out."""
    seen = 0

    def walk(sector: bytes, offset: int, first_ebr: int | None) -> None:
        nonlocal seen
        for ptype, first, _count in _entries(sector):
            if ptype not in _EXTENDED:
                continue
            at = offset + first * SECTOR
            if not first_ebr:
                first_ebr = at
            else:
                at = first_ebr + first * SECTOR
            seen += 1
            if seen > MAX_EBRS:
                raise _corrupt(f"MBR: the extended partitions chain more than {MAX_EBRS} records", where)
            ebr = read_at(disk, at, SECTOR)
            if len(ebr) < SECTOR:
                raise _corrupt(
                    f"MBR: an extended boot record at byte {at} is past the end of the disk", where
                )
            walk(ebr, at, first_ebr)

    walk(mbr, 0, None)


def check_lvm(stream: BinaryIO, size: int, where: str) -> None:
    """The PV label, its area descriptors and the first metadata area's text location, as
    dissect.volume reads them, each inside its sector and the metadata inside the volume."""
    for i in range(4):
        label = read_at(stream, i * SECTOR, SECTOR)
        if label[:8] == b"LABELONE":
            break
    else:
        raise _corrupt("LVM: no physical volume label", where)
    (header_at,) = struct.unpack_from("<I", label, 20)
    pos = header_at + 40  # pv_uuid and device_size
    _data_areas, pos = _locations(label, pos, _LOCATION, "data area", where)
    metadata_areas, _ = _locations(label, pos, _LOCATION, "metadata area", where)
    if not metadata_areas:
        return  # dissect reads no metadata then (and finds no volume group)
    mda_at = metadata_areas[0][0]
    header = read_at(stream, mda_at, SECTOR)
    if len(header) < _MDA.size:
        raise _corrupt(f"LVM: metadata area header at byte {mda_at} is past the end of the volume", where)
    _crc, _magic, _version, start, area_size = _MDA.unpack_from(header)
    texts, _ = _locations(header, _MDA.size, _RAW_LOCATION, "metadata location", where)
    if not texts:
        raise _corrupt("LVM: the metadata area names no metadata", where)
    text_at, text_len = texts[0][0], texts[0][1]
    if (
        text_len == 0
        or text_len > MAX_LVM_METADATA
        or text_at + text_len > area_size
        or start + area_size > size
    ):
        raise _corrupt(
            f"LVM: metadata of {text_len} bytes at {text_at} in an area of {area_size} bytes at byte {start} "
            f"does not fit the {size}-byte volume (or the {MAX_LVM_METADATA}-byte cap)",
            where,
        )


def _locations(raw: bytes, pos: int, shape: struct.Struct, what: str, where: str) -> tuple[list[Any], int]:
    """A descriptor list ending with an all-zero entry, wholly inside ``raw`` (its sector)."""
    out: list[Any] = []
    while True:
        if pos + shape.size > len(raw) or len(out) > MAX_LVM_LOCATIONS:
            raise _corrupt(f"LVM: the {what} list does not end inside its sector", where)
        entry = shape.unpack_from(raw, pos)
        pos += shape.size
        if not any(entry):
            return out, pos
        out.append(entry)
