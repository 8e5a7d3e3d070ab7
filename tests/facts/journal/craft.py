"""Surgery on real journal files, for tests and benchmarks that need a damaged or hostile one.

Written from systemd's ``docs/JOURNAL_FILE_FORMAT.md`` independently of ``imagelint``'s reader, so
the damage a test makes does not depend on the code under test. ``JournalBytes`` wraps a whole file:
header fields by name, a sequential walk over the objects, the global entry-array chain, and
``relocate_data`` to give a DATA object a new (e.g. hostile) payload by appending a copy of it at
the end of the arena and pointing every reference at the copy.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

HEADER_FIELDS = {  # name: (offset, struct format) in the journal file header
    "compatible_flags": (8, "<I"),
    "incompatible_flags": (12, "<I"),
    "state": (16, "<B"),
    "header_size": (88, "<Q"),
    "arena_size": (96, "<Q"),
    "data_hash_table_offset": (104, "<Q"),
    "data_hash_table_size": (112, "<Q"),
    "field_hash_table_offset": (120, "<Q"),
    "field_hash_table_size": (128, "<Q"),
    "tail_object_offset": (136, "<Q"),
    "n_objects": (144, "<Q"),
    "n_entries": (152, "<Q"),
    "tail_entry_seqnum": (160, "<Q"),
    "head_entry_seqnum": (168, "<Q"),
    "entry_array_offset": (176, "<Q"),
    "head_entry_realtime": (184, "<Q"),
    "tail_entry_realtime": (192, "<Q"),
    "tail_entry_monotonic": (200, "<Q"),
    "n_data": (208, "<Q"),
    "n_fields": (216, "<Q"),
    "n_tags": (224, "<Q"),
    "n_entry_arrays": (232, "<Q"),
}

STATE_OFFLINE, STATE_ONLINE, STATE_ARCHIVED = 0, 1, 2
OBJECT_DATA, OBJECT_FIELD, OBJECT_ENTRY = 1, 2, 3
OBJECT_DATA_HASH_TABLE, OBJECT_FIELD_HASH_TABLE, OBJECT_ENTRY_ARRAY, OBJECT_TAG = 4, 5, 6, 7
HEADER_COMPRESSED_XZ, HEADER_COMPRESSED_LZ4, HEADER_KEYED_HASH = 1, 2, 4
HEADER_COMPRESSED_ZSTD, HEADER_COMPACT = 8, 16
OBJECT_COMPRESSED_XZ, OBJECT_COMPRESSED_LZ4, OBJECT_COMPRESSED_ZSTD = 1, 2, 4


@dataclass(frozen=True)
class Obj:
    offset: int
    type: int
    flags: int
    size: int


def align8(n: int) -> int:
    return (n + 7) & ~7


class JournalBytes:
    """A journal file held in memory, with the few structures tests need to find and change."""

    def __init__(self, data: bytes) -> None:
        self.data = bytearray(data)

    def __bytes__(self) -> bytes:
        return bytes(self.data)

    # -- header ----------------------------------------------------------------------------------

    def get(self, name: str) -> int:
        off, fmt = HEADER_FIELDS[name]
        return int(struct.unpack_from(fmt, self.data, off)[0])

    def set(self, name: str, value: int) -> None:
        off, fmt = HEADER_FIELDS[name]
        struct.pack_into(fmt, self.data, off, value)

    @property
    def compact(self) -> bool:
        return bool(self.get("incompatible_flags") & HEADER_COMPACT)

    @property
    def data_payload_offset(self) -> int:
        return 72 if self.compact else 64

    @property
    def entry_item_size(self) -> int:
        return 4 if self.compact else 16

    # -- objects ---------------------------------------------------------------------------------

    def object_at(self, off: int) -> Obj:
        otype, flags, size = struct.unpack_from("<BB6xQ", self.data, off)
        return Obj(off, otype, flags, size)

    def objects(self) -> Iterator[Obj]:
        """Every object from the end of the header to the tail object, in file order."""
        off = self.get("header_size")
        tail = self.get("tail_object_offset")
        while 0 < off <= tail and off + 16 <= len(self.data):
            obj = self.object_at(off)
            if obj.size < 16:
                return
            yield obj
            off += align8(obj.size)

    def entry_array_items(self, first: int | None = None) -> list[tuple[int, int]]:
        """(position in the file, entry offset) of every used item of an entry-array chain (by default
        the header's global one), in order."""
        width = 4 if self.compact else 8
        fmt = "<I" if self.compact else "<Q"
        out: list[tuple[int, int]] = []
        off = self.get("entry_array_offset") if first is None else first
        while off:
            obj = self.object_at(off)
            assert obj.type == OBJECT_ENTRY_ARRAY, obj
            (nxt,) = struct.unpack_from("<Q", self.data, off + 16)
            for pos in range(off + 24, off + obj.size - width + 1, width):
                (item,) = struct.unpack_from(fmt, self.data, pos)
                if item == 0:
                    return out
                out.append((pos, item))
            off = nxt
        return out

    def entry_offsets(self) -> list[int]:
        return [item for _pos, item in self.entry_array_items()]

    def entry_items(self, entry_off: int) -> list[tuple[int, int]]:
        """(position in the file, DATA offset) of each item of the ENTRY object at ``entry_off``."""
        obj = self.object_at(entry_off)
        size = self.entry_item_size
        fmt = "<I" if self.compact else "<Q"
        return [
            (pos, struct.unpack_from(fmt, self.data, pos)[0])
            for pos in range(entry_off + 64, entry_off + obj.size - size + 1, size)
        ]

    def data_payload(self, off: int) -> bytes:
        obj = self.object_at(off)
        return bytes(self.data[off + self.data_payload_offset : off + obj.size])

    def find_data(self, prefix: bytes) -> list[int]:
        """Offsets of the DATA objects whose stored payload starts with ``prefix`` (uncompressed ones,
        or compressed ones when ``prefix`` is matched against the stored bytes)."""
        po = self.data_payload_offset
        return [
            o.offset
            for o in self.objects()
            if o.type == OBJECT_DATA
            and bytes(self.data[o.offset + po : o.offset + po + len(prefix)]) == prefix
        ]

    # -- surgery ---------------------------------------------------------------------------------

    def append_object(self, raw: bytes) -> int:
        """Append ``raw`` (a whole object, header included) after the tail object; return its offset."""
        tail = self.get("tail_object_offset")
        off = align8(tail + self.object_at(tail).size)
        end = off + align8(len(raw))
        if end > len(self.data):
            self.data.extend(bytes(end - len(self.data)))
        self.data[off : off + len(raw)] = raw
        self.set("tail_object_offset", off)
        self.set("n_objects", self.get("n_objects") + 1)
        header_size = self.get("header_size")
        if end - header_size > self.get("arena_size"):
            self.set("arena_size", end - header_size)
        return off

    def _u64(self, pos: int) -> int:
        return int(struct.unpack_from("<Q", self.data, pos)[0])

    def _set_u64(self, pos: int, value: int) -> None:
        struct.pack_into("<Q", self.data, pos, value)

    def payload_hash(self, payload: bytes) -> int:
        """The hash this file stores for an (uncompressed) payload: siphash24 keyed by the file id,
        or Jenkins lookup3 in an unkeyed file (the functions checked by ``test_hashing``)."""
        from imagelint.facts.journal.hashing import journal_hash

        keyed = bool(self.get("incompatible_flags") & HEADER_KEYED_HASH)
        return journal_hash(payload, keyed=keyed, file_id=bytes(self.data[24:40]))

    def relocate_data(self, off: int, payload: bytes, flags: int, *, rehash: bool = False) -> int:
        """Give the DATA object at ``off`` a new stored ``payload`` and object ``flags``.

        A copy of its header (hash, entry links and counts) with the new payload is appended at the
        end of the arena and takes the old object's place as writers would have linked it: at the
        tail of its hash chain (chains ascend), at the head of its field's data list (lists
        descend), and in every entry's items (kept sorted by offset). The old object is left
        unreferenced. The copy keeps the old object's hash (a reader checking it finds the object
        damaged) unless ``rehash`` (an uncompressed payload only): then it stores the payload's own
        hash and sits in that hash's chain, as a hostile writer would make it. Returns its offset.
        """
        po = self.data_payload_offset
        old_hash = self._u64(off + 16)
        new_hash = self.payload_hash(payload) if rehash else old_hash
        assert not (rehash and flags), "rehash hashes the payload as stored: uncompressed only"
        head = bytearray(self.data[off : off + po])
        head[1] = flags
        struct.pack_into("<QQQ", head, 8, po + len(payload), new_hash, 0)  # size, hash, next_hash
        struct.pack_into("<Q", head, 32, 0)  # next_field_offset, set below
        new = self.append_object(bytes(head) + payload)
        # the hash chain: unlink the old object, append the new one at the tail of its hash's chain
        table, size = self.get("data_hash_table_offset"), self.get("data_hash_table_size")
        bucket = table + (old_hash % (size // 16)) * 16
        prev, cur = 0, self._u64(bucket)
        steps = len(self.data) // 16  # no chain is longer, unless the file is damaged (a loop)
        while cur and cur != off and steps > 0:
            prev, cur = cur, self._u64(cur + 24)
            steps -= 1
        if cur == off:
            after = self._u64(off + 24)
            self._set_u64(prev + 24 if prev else bucket, after)
            if self._u64(bucket + 8) == off:
                self._set_u64(bucket + 8, prev)
        bucket = table + (new_hash % (size // 16)) * 16
        tail = self._u64(bucket + 8)
        self._set_u64(tail + 24 if tail else bucket, new)
        self._set_u64(bucket + 8, new)
        # the field's data list: unlink the old object, the new one becomes the head
        name = (
            bytes(self.data[off + po : off + po + 64]).split(b"=", 1)[0]
            if not self.object_at(off).flags
            else None
        )
        for obj in self.objects():
            if obj.type != OBJECT_FIELD:
                continue
            if name is not None and bytes(self.data[obj.offset + 40 : obj.offset + obj.size]) != name:
                continue
            prev, cur = 0, self._u64(obj.offset + 32)
            steps = len(self.data) // 16
            while cur and cur != off and steps > 0:
                prev, cur = cur, self._u64(cur + 32)
                steps -= 1
            if cur != off:
                continue
            self._set_u64(prev + 32 if prev else obj.offset + 32, self._u64(off + 32))
            self._set_u64(new + 32, self._u64(obj.offset + 32))
            self._set_u64(obj.offset + 32, new)
            break
        # entry items, kept in ascending order of offset
        for obj in list(self.objects()):
            if obj.type != OBJECT_ENTRY:
                continue
            items = self.entry_items(obj.offset)
            if not any(item == off for _pos, item in items):
                continue
            step = self.entry_item_size
            start = obj.offset + 64
            raw = [bytes(self.data[p : p + step]) for p, _item in items]
            fmt = "<I" if self.compact else "<Q"
            replaced = [
                struct.pack(fmt, new) + r[struct.calcsize(fmt) :] if item == off else r
                for r, (_p, item) in zip(raw, items, strict=True)
            ]
            replaced.sort(key=lambda r: struct.unpack_from(fmt, r)[0])
            self.data[start : start + step * len(replaced)] = b"".join(replaced)
        return new


def _pointer_fields(jb: JournalBytes, obj: Obj) -> Iterator[tuple[int, int]]:
    """(position, width) of every field of ``obj`` that holds an offset into the file."""
    off = obj.offset
    if obj.type == OBJECT_DATA:
        yield from ((off + 24, 8), (off + 32, 8), (off + 40, 8), (off + 48, 8))
        if jb.compact:
            yield off + 64, 4
    elif obj.type == OBJECT_FIELD:
        yield from ((off + 24, 8), (off + 32, 8))
    elif obj.type == OBJECT_ENTRY:
        step = jb.entry_item_size
        for pos in range(off + 64, off + obj.size - step + 1, step):
            yield pos, (4 if jb.compact else 8)
    elif obj.type in (OBJECT_DATA_HASH_TABLE, OBJECT_FIELD_HASH_TABLE):
        for pos in range(off + 16, off + obj.size, 8):
            yield pos, 8
    elif obj.type == OBJECT_ENTRY_ARRAY:
        yield off + 16, 8
        width = 4 if jb.compact else 8
        for pos in range(off + 24, off + obj.size - width + 1, width):
            yield pos, width


def shrink_data_hash_table(jb: JournalBytes, buckets: int) -> JournalBytes:
    """The same journal with a data hash table of ``buckets`` buckets, everything after it moved up.

    systemd-journal-remote sizes the table for the largest file it might write (megabytes of empty
    buckets in a small file); fuzzing wants the bytes that matter. Every DATA object is re-chained
    by its stored hash (chains in ascending offset order, as writers make them) and every offset in
    the header and in every object is moved. The result passes ``journalctl --verify``.
    """
    table = jb.get("data_hash_table_offset") - 16
    old_obj = jb.object_at(table)
    assert old_obj.type == OBJECT_DATA_HASH_TABLE
    old_end = table + align8(old_obj.size)
    new_size = 16 + 16 * buckets
    delta = old_end - (table + align8(new_size))
    assert delta >= 0
    tail = jb.get("tail_object_offset")
    used_end = tail + align8(jb.object_at(tail).size)

    def moved(ptr: int) -> int:
        return ptr - delta if ptr >= old_end else ptr

    objects = [o for o in jb.objects() if o.offset != table]
    out = JournalBytes(bytes(jb.data[:table]) + bytes(align8(new_size)) + bytes(jb.data[old_end:used_end]))
    struct.pack_into("<BB6xQ", out.data, table, OBJECT_DATA_HASH_TABLE, 0, new_size)
    for obj in objects:
        new = Obj(moved(obj.offset), obj.type, obj.flags, obj.size)
        for pos, width in _pointer_fields(out, new):
            fmt = "<I" if width == 4 else "<Q"
            (ptr,) = struct.unpack_from(fmt, out.data, pos)
            if ptr:
                struct.pack_into(fmt, out.data, pos, moved(ptr))
    # re-chain the DATA objects into the new buckets
    heads: dict[int, int] = {}
    tails: dict[int, int] = {}
    for obj in objects:
        if obj.type != OBJECT_DATA:
            continue
        off = moved(obj.offset)
        (h,) = struct.unpack_from("<Q", out.data, off + 16)
        struct.pack_into("<Q", out.data, off + 24, 0)
        b = h % buckets
        if b in tails:
            struct.pack_into("<Q", out.data, tails[b] + 24, off)
        else:
            heads[b] = off
        tails[b] = off
    for b, head in heads.items():
        struct.pack_into("<QQ", out.data, table + 16 + 16 * b, head, tails[b])
    out.set("data_hash_table_size", 16 * buckets)
    for name in ("field_hash_table_offset", "tail_object_offset", "entry_array_offset"):
        out.set(name, moved(out.get(name)))
    if out.get("header_size") >= 264 and out.compact:
        (tail_array,) = struct.unpack_from("<I", out.data, 256)
        if tail_array:
            struct.pack_into("<I", out.data, 256, moved(tail_array))
    if out.get("header_size") >= 272:
        (tail_entry,) = struct.unpack_from("<Q", out.data, 264)
        if tail_entry:
            struct.pack_into("<Q", out.data, 264, moved(tail_entry))
    out.set("arena_size", len(out.data) - out.get("header_size"))
    return out
