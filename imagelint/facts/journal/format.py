"""The on-disk layout of systemd journal files: constants, structures and the header.

Written from systemd's published specification (``docs/JOURNAL_FILE_FORMAT.md``). All integers are
little endian; offsets are relative to the start of the file and 8-byte aligned. The header grew over
time and its size tells the writer's generation (208 bytes before 187 … 272 bytes from 254); fields
past ``n_entries`` exist only when the header is long enough to hold them.

Parsing the header is the one place that decides whether a file is read at all: an unknown
incompatible flag raises ``UnsupportedJournal``, a broken header ``CorruptJournal``.
"""

from __future__ import annotations

import struct
from enum import IntEnum, IntFlag
from typing import NamedTuple

from imagelint.facts.journal.errors import CorruptJournal, UnsupportedJournal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from imagelint.facts.journal.paged import PagedBuffer

SIGNATURE = b"LPKSHHRH"


class IncompatibleFlag(IntFlag):
    COMPRESSED_XZ = 1 << 0
    COMPRESSED_LZ4 = 1 << 1
    KEYED_HASH = 1 << 2
    COMPRESSED_ZSTD = 1 << 3
    COMPACT = 1 << 4


KNOWN_INCOMPATIBLE = (
    IncompatibleFlag.COMPRESSED_XZ
    | IncompatibleFlag.COMPRESSED_LZ4
    | IncompatibleFlag.KEYED_HASH
    | IncompatibleFlag.COMPRESSED_ZSTD
    | IncompatibleFlag.COMPACT
)


class CompatibleFlag(IntFlag):
    SEALED = 1 << 0
    TAIL_ENTRY_BOOT_ID = 1 << 1


class State(IntEnum):
    OFFLINE = 0
    ONLINE = 1
    ARCHIVED = 2


class ObjectType(IntEnum):
    UNUSED = 0
    DATA = 1
    FIELD = 2
    ENTRY = 3
    DATA_HASH_TABLE = 4
    FIELD_HASH_TABLE = 5
    ENTRY_ARRAY = 6
    TAG = 7


class ObjectFlag(IntFlag):
    COMPRESSED_XZ = 1 << 0
    COMPRESSED_LZ4 = 1 << 1
    COMPRESSED_ZSTD = 1 << 2


# Header sizes by writer generation; anything at least as large as the oldest is accepted (newer
# writers append fields we do not need), anything smaller is not a journal header.
HEADER_SIZE_MIN = 208
HEADER_SIZES = {208: "before 187", 224: "187", 240: "189", 256: "246", 264: "252", 272: "254"}

# ObjectHeader: type, flags, reserved[6], size
OBJECT_HEADER = struct.Struct("<BB6xQ")
OBJECT_HEADER_SIZE = OBJECT_HEADER.size  # 16
# DataObject after the object header: hash, next_hash_offset, next_field_offset, entry_offset,
# entry_array_offset, n_entries; compact files add tail_entry_array_offset and _n_entries (2 x le32).
DATA_OBJECT = struct.Struct("<BB6xQQQQQQQ")
DATA_PAYLOAD_OFFSET_REGULAR = 64
DATA_PAYLOAD_OFFSET_COMPACT = 72
# FieldObject after the object header: hash, next_hash_offset, head_data_offset
FIELD_OBJECT = struct.Struct("<BB6xQQQQ")
FIELD_PAYLOAD_OFFSET = 40
# EntryObject: object header, seqnum, realtime, monotonic, boot_id, xor_hash, then items
ENTRY_OBJECT = struct.Struct("<BB6xQQQQ16sQ")
ENTRY_ITEMS_OFFSET = 64
ENTRY_ITEM_SIZE_REGULAR = 16  # le64 object_offset, le64 hash
ENTRY_ITEM_SIZE_COMPACT = 4  # le32 object_offset
# EntryArrayObject: object header, next_entry_array_offset, then items
ENTRY_ARRAY_OBJECT = struct.Struct("<BB6xQQ")
ENTRY_ARRAY_ITEMS_OFFSET = 24
HASH_ITEM = struct.Struct("<QQ")  # head_hash_offset, tail_hash_offset

_HEADER_BASE = struct.Struct("<8sIIB7x16s16s16s16sQQQQQQQQQQQQQQQ")  # up to tail_entry_monotonic (208)
_HEADER_187 = struct.Struct("<QQ")  # n_data, n_fields at 208
_HEADER_189 = struct.Struct("<QQ")  # n_tags, n_entry_arrays at 224


class JournalHeader(NamedTuple):
    """The fields of a journal file header this reader uses, with the flags decoded."""

    compatible_flags: int
    incompatible_flags: int
    state: int
    file_id: bytes
    machine_id: bytes
    tail_entry_boot_id: bytes
    seqnum_id: bytes
    header_size: int
    arena_size: int
    data_hash_table_offset: int
    data_hash_table_size: int
    field_hash_table_offset: int
    field_hash_table_size: int
    tail_object_offset: int
    n_objects: int
    n_entries: int
    tail_entry_seqnum: int
    head_entry_seqnum: int
    entry_array_offset: int
    head_entry_realtime: int
    tail_entry_realtime: int
    tail_entry_monotonic: int
    n_data: int | None
    n_fields: int | None

    @property
    def compact(self) -> bool:
        return bool(self.incompatible_flags & IncompatibleFlag.COMPACT)

    @property
    def keyed_hash(self) -> bool:
        return bool(self.incompatible_flags & IncompatibleFlag.KEYED_HASH)

    @property
    def state_name(self) -> str:
        try:
            return State(self.state).name.lower()
        except ValueError:
            return f"unknown state {self.state}"

    @property
    def writer_generation(self) -> str:
        """The systemd version that introduced this header size (a hint, not a guarantee)."""
        known = HEADER_SIZES.get(self.header_size)
        return f"systemd {known}" if known else f"unknown (header size {self.header_size})"

    def flag_names(self) -> list[str]:
        names = [f.name or str(int(f)) for f in IncompatibleFlag if self.incompatible_flags & f]
        names += [f.name or str(int(f)) for f in CompatibleFlag if self.compatible_flags & f]
        return names


def parse_header(buf: bytes | bytearray | memoryview | PagedBuffer, file_size: int) -> JournalHeader:
    """Validate and decode the header at the start of ``buf`` (the whole mapped file).

    Raises ``UnsupportedJournal`` for unknown incompatible flags and ``CorruptJournal`` for anything
    that is not a usable journal header (wrong signature, impossible sizes, tables out of range).
    """
    if file_size < _HEADER_BASE.size:
        raise CorruptJournal(f"too short for a journal header ({file_size} bytes)")
    fields = _HEADER_BASE.unpack(buf[0 : _HEADER_BASE.size])
    signature, compat, incompat, state = fields[0:4]
    if signature != SIGNATURE:
        raise CorruptJournal("not a journal file (bad signature)")
    unknown = incompat & ~int(KNOWN_INCOMPATIBLE)
    if unknown:
        raise UnsupportedJournal(
            f"uses unsupported incompatible feature flags {unknown:#x} (flags {incompat:#x}); "
            "a newer reader is needed"
        )
    (file_id, machine_id, tail_boot, seqnum_id) = fields[4:8]
    (
        header_size,
        arena_size,
        dht_off,
        dht_size,
        fht_off,
        fht_size,
        tail_object_offset,
        n_objects,
        n_entries,
        tail_seqnum,
        head_seqnum,
        entry_array_offset,
        head_realtime,
        tail_realtime,
        tail_monotonic,
    ) = fields[8:]
    if header_size < HEADER_SIZE_MIN or header_size % 8 or header_size > file_size:
        raise CorruptJournal(f"impossible header size {header_size} for a {file_size}-byte file")
    n_data = n_fields = None
    if header_size >= 224:
        n_data, n_fields = _HEADER_187.unpack(buf[208 : 208 + _HEADER_187.size])
    end = header_size + arena_size
    for name, off, size in (("data", dht_off, dht_size), ("field", fht_off, fht_size)):
        if size == 0 or size % HASH_ITEM.size or off % 8 or off < header_size + OBJECT_HEADER_SIZE:
            raise CorruptJournal(f"{name} hash table has impossible offset {off} or size {size}")
        if off + size > end:
            raise CorruptJournal(f"{name} hash table lies beyond the arena", offset=off)
        if off + size > file_size:
            raise CorruptJournal(
                f"truncated: the file is {file_size} bytes but its header describes {end}; "
                f"the {name} hash table is cut off"
            )
    return JournalHeader(
        compatible_flags=compat,
        incompatible_flags=incompat,
        state=state,
        file_id=file_id,
        machine_id=machine_id,
        tail_entry_boot_id=tail_boot,
        seqnum_id=seqnum_id,
        header_size=header_size,
        arena_size=arena_size,
        data_hash_table_offset=dht_off,
        data_hash_table_size=dht_size,
        field_hash_table_offset=fht_off,
        field_hash_table_size=fht_size,
        tail_object_offset=tail_object_offset,
        n_objects=n_objects,
        n_entries=n_entries,
        tail_entry_seqnum=tail_seqnum,
        head_entry_seqnum=head_seqnum,
        entry_array_offset=entry_array_offset,
        head_entry_realtime=head_realtime,
        tail_entry_realtime=tail_realtime,
        tail_entry_monotonic=tail_monotonic,
        n_data=n_data,
        n_fields=n_fields,
    )
