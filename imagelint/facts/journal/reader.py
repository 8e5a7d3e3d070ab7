"""One journal file, memory-mapped and read defensively.

``JournalFile`` walks the structures described in ``format``: the global entry-array chain for a
full listing, the DATA hash table plus a DATA object's own entry-array chain for indexed
``FIELD=value`` lookups, and ENTRY objects whose items point at (possibly compressed) DATA objects.

Every offset is checked before it is read: 8-byte aligned, inside the used part of the file
(header plus arena, clipped to the real file size), pointing at an object of the expected type and
of a plausible size. Chains must move strictly forward through the file (writers only append), so a
loop or a back-pointer is detected as corruption instead of spinning. Any inconsistency raises
``CorruptJournal``; callers (``Journal``) record it against the file and carry on with the rest.

Entries are decoded to dicts (see ``decode`` for the value types). DATA objects referenced by more
than one entry are decoded once and cached; unique ones (a MESSAGE) are not, so memory stays flat.

Asked for some fields only (``entry(off, fields)``), the reader decodes no more than those: it learns
which DATA objects hold the wanted fields from each FIELD object's list of its DATA objects (walked
a little at a time, in proportion to the work it saves), and until that list is complete it reads
just the name in front of the ``=`` of an item it does not know yet. A DATA object that is neither
wanted nor needed is then never read, so damage confined to it goes unnoticed by such a read.
"""

from __future__ import annotations

import itertools
import mmap
import os
import struct
import weakref
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence

from imagelint.facts.journal.compression import decompress
from imagelint.facts.journal.errors import CorruptJournal
from imagelint.facts.journal.format import (
    DATA_OBJECT,
    DATA_PAYLOAD_OFFSET_COMPACT,
    DATA_PAYLOAD_OFFSET_REGULAR,
    ENTRY_ARRAY_ITEMS_OFFSET,
    ENTRY_ARRAY_OBJECT,
    ENTRY_ITEM_SIZE_COMPACT,
    ENTRY_ITEM_SIZE_REGULAR,
    ENTRY_ITEMS_OFFSET,
    ENTRY_OBJECT,
    FIELD_OBJECT,
    FIELD_PAYLOAD_OFFSET,
    HASH_ITEM,
    OBJECT_HEADER,
    JournalHeader,
    ObjectType,
    parse_header,
)
from imagelint.facts.journal.hashing import journal_hash

TYPE_CHECKING = False
if TYPE_CHECKING:  # ``typing`` costs milliseconds to import and is needed for annotations only
    from typing import BinaryIO

Value = str | bytes
"""A field value: ``str`` when the bytes are valid UTF-8, else the raw ``bytes``."""
FieldValue = Value | list[Value]
"""One field of an entry: a single value, or a list in entry order when the field repeats."""
Entry = dict[str, object]
"""An entry: field name → ``FieldValue``, plus the metadata keys listed in ``META_FIELDS``."""

META_FIELDS = (
    "__CURSOR",
    "__REALTIME_TIMESTAMP",
    "__MONOTONIC_TIMESTAMP",
    "_BOOT_ID",
    "__SEQNUM",
    "__SEQNUM_ID",
)
EntryKey = tuple[bytes, int, bytes, int, int, int]
"""(seqnum_id, seqnum, boot_id, monotonic, realtime, xor_hash): what ordering across files needs."""

_CACHE_LIMIT = 200_000  # decoded shared DATA objects kept per file
_CACHE_VALUE_LIMIT = 65_536  # larger values are decoded every time rather than kept
_MAX_CHAIN = 1_000_000  # hash-chain steps before we call it a loop
_WALK_FIRST = 64  # FIELD data-list steps a field selection may take before any item is probed
_WALK_CAP = 16_384  # ... and at most, per field selection and file: past it, probing goes on alone
_DATA = int(ObjectType.DATA)
_ENTRY = int(ObjectType.ENTRY)
_U64_AT = struct.Struct("<Q")
_DATA_N_ENTRIES = 56  # DataObject.n_entries
_DATA_NEXT_FIELD = 32  # DataObject.next_field_offset
# struct layouts by item count, made when first needed (up to _STRUCTS_KEPT items they are kept)
_STRUCTS_KEPT = 256
_U32: dict[int, struct.Struct] = {}
_U64: dict[int, struct.Struct] = {}
_ITEMS_REGULAR: dict[int, struct.Struct] = {}  # regular entry items: the object offsets, hashes skipped


def _layout(table: dict[int, struct.Struct], n: int, fmt: str) -> struct.Struct:
    s = table.get(n)
    if s is None:
        s = struct.Struct("<" + fmt * n if len(fmt) > 1 else f"<{n}{fmt}")
        if n <= _STRUCTS_KEPT:
            table[n] = s
    return s


def _unpack_u32(buf: bytes | mmap.mmap, off: int, n: int) -> tuple[int, ...]:
    s = _U32.get(n) or _layout(_U32, n, "I")
    return s.unpack_from(buf, off)


def _unpack_u64(buf: bytes | mmap.mmap, off: int, n: int) -> tuple[int, ...]:
    s = _U64.get(n) or _layout(_U64, n, "Q")
    return s.unpack_from(buf, off)


def _regular_items(buf: bytes | mmap.mmap, off: int, n: int) -> tuple[int, ...]:
    s = _ITEMS_REGULAR.get(n) or _layout(_ITEMS_REGULAR, n, "Q8x")
    return s.unpack_from(buf, off)


def _with_repeats(pairs: list[tuple[str, Value]], fields: Collection[str] | None) -> Entry:
    out: Entry = {}
    for name, value in pairs:
        if fields is not None and name not in fields:
            continue
        prev = out.get(name)
        if prev is None:
            out[name] = value
        elif type(prev) is list:
            prev.append(value)
        else:
            out[name] = [prev, value]
    return out


_MAPPED: weakref.WeakSet[JournalFile] = weakref.WeakSet()
MAPPED_BUDGET = 64 * 1024 * 1024
"""File-backed memory this process may keep mapped before journal pages are released."""
_PAGE = os.sysconf("SC_PAGE_SIZE")
_GUARD_EVERY = 1024
"""Read costs between two looks at the mapped size: an entry read near the previous one costs 1, a
jump elsewhere in a file ``_JUMP`` (a fault maps up to 16 pages around the one touched), so scattered
index lookups look after memory 16 times as often as a sequential scan."""
_JUMP = 16
_NEAR = 65_536
_ticks = 0


def memory_guard() -> None:
    """Keep resident mapped journal pages under ``MAPPED_BUDGET``.

    Reading through ``mmap`` maps every page touched (and the kernel maps neighbours around each
    fault), so a full scan of a large journal would otherwise count the whole file in this
    process's RSS. Released pages stay in the page cache and come back on a cheap minor fault.
    """
    try:
        with open("/proc/self/statm", "rb") as f:
            shared = int(f.read().split()[2]) * _PAGE
    except (OSError, ValueError, IndexError):
        return
    if shared > MAPPED_BUDGET:
        for jf in list(_MAPPED):
            jf.release_pages()


def _tick(cost: int) -> None:
    global _ticks
    _ticks += cost
    if _ticks >= _GUARD_EVERY:
        _ticks = 0
        memory_guard()


def decode(raw: bytes) -> Value:
    """A field value as this reader returns it: ``str`` if valid UTF-8, else ``bytes``."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


class _DataCache(dict[int, tuple[str, Value]]):
    """Decoded shared DATA objects by offset; a miss decodes the object (and keeps it if shared)."""

    __slots__ = ("load",)

    def __init__(self, load: object) -> None:
        super().__init__()
        self.load = load

    def __missing__(self, off: int) -> tuple[str, Value]:
        return self.load(off)  # type: ignore[operator,no-any-return]


class _Selection:
    """What one file has learnt about one set of wanted fields.

    ``known`` maps a DATA object's offset to its decoded (field, value) when the field is wanted
    (``True`` instead when the value is too large to keep), or to ``False`` when it is not; only
    objects shared by several entries are remembered as unwanted. ``walk`` lists the wanted fields
    whose FIELD data lists are still to be read (``cursor``: where the last one stopped); once all
    are read (``closed``), every DATA object of a wanted field is in ``known`` and an item that is
    not can be skipped unread.
    """

    __slots__ = ("closed", "cursor", "has_large", "known", "probes", "walk", "walked", "wanted", "wanted_raw")

    def __init__(self, wanted: frozenset[str], walk: bool) -> None:
        self.wanted = wanted
        self.wanted_raw = frozenset(name.encode("utf-8", "surrogateescape") for name in wanted)
        self.known: dict[int, tuple[str, Value] | bool] = {}
        self.closed = False
        self.has_large = False
        self.walk = sorted(wanted, reverse=True) if walk else []
        self.cursor: int | None = None
        self.probes = 0
        self.walked = 0

    def give_up_walking(self) -> None:
        self.walk = []
        self.closed = False


class JournalFile:
    """A read-only view of one journal file.

    Open with ``JournalFile.open(path)`` or ``JournalFile.from_file(fileobj, name)``; both validate
    the header (raising ``UnsupportedJournal`` or ``CorruptJournal``) before returning.
    """

    def __init__(self, buf: mmap.mmap | bytes, name: str, file_size: int) -> None:
        self.name = name
        self._buf = buf
        self.file_size = file_size
        self.header: JournalHeader = parse_header(buf, file_size)
        h = self.header
        declared_end = h.header_size + h.arena_size
        self.truncated = file_size < declared_end
        self._end = min(file_size, declared_end)
        self._first = h.header_size
        self.compact = h.compact
        self._item_size = ENTRY_ITEM_SIZE_COMPACT if self.compact else ENTRY_ITEM_SIZE_REGULAR
        self._data_payload = DATA_PAYLOAD_OFFSET_COMPACT if self.compact else DATA_PAYLOAD_OFFSET_REGULAR
        self._seqnum_id_hex = h.seqnum_id.hex()
        self._cache = _DataCache(self._load_data)
        self._boot_hex: dict[bytes, str] = {}
        self._names: dict[bytes, str] = {}
        self._selections: dict[frozenset[str], _Selection] = {}
        # a FIELD object's data list is trusted to be complete only in a file closed cleanly
        self._lists_complete = not self.truncated and h.state_name in ("offline", "archived")
        self._chain_limit = min(_MAX_CHAIN, h.n_data if h.n_data is not None else h.n_objects)
        self._last = 0
        if isinstance(buf, mmap.mmap):
            _MAPPED.add(self)

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> JournalFile:
        with open(path, "rb") as f:
            return cls.from_file(f, os.fspath(path))

    @classmethod
    def from_file(cls, f: BinaryIO, name: str) -> JournalFile:
        """Map an open file (the mapping outlives ``f``, which the caller may close)."""
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise CorruptJournal("zero-length file")
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            return cls(buf, name, size)
        except Exception:
            buf.close()
            raise

    def close(self) -> None:
        self._cache.clear()
        self._selections.clear()
        _MAPPED.discard(self)
        if isinstance(self._buf, mmap.mmap):
            self._buf.close()

    def release_pages(self) -> None:
        """Drop this process's mapping of the file's pages (they stay in the page cache)."""
        if isinstance(self._buf, mmap.mmap) and not self._buf.closed:
            self._buf.madvise(mmap.MADV_DONTNEED)

    def __repr__(self) -> str:
        return f"JournalFile({self.name!r})"

    def _touch(self, off: int) -> None:
        """Account for reading near ``off`` (see ``_GUARD_EVERY``)."""
        _tick(1 if 0 <= off - self._last < _NEAR else _JUMP)
        self._last = off

    # -- objects -------------------------------------------------------------------------------

    def _check(self, off: int, minimum: int, what: str) -> None:
        if off & 7 or off < self._first or off + minimum > self._end:
            if off + minimum > self._end and self.truncated:
                raise CorruptJournal(f"{what} lies beyond the end of the truncated file", offset=off)
            raise CorruptJournal(f"{what} has an invalid offset", offset=off)

    def _object(self, off: int, expected: ObjectType, minimum: int) -> tuple[int, int]:
        """Validate the object header at ``off``; return (flags, size)."""
        self._check(off, minimum, expected.name.lower())
        otype, flags, size = OBJECT_HEADER.unpack_from(self._buf, off)
        if otype != expected:
            raise CorruptJournal(f"expected a {expected.name} object, found type {otype}", offset=off)
        if size < minimum or off + size > self._end:
            raise CorruptJournal(f"{expected.name} object has an impossible size {size}", offset=off)
        return flags, size

    def _data_header(self, off: int) -> tuple[int, int]:
        """(flags, size) of the DATA object at ``off``, validated; the common case inline."""
        po = self._data_payload
        if not (off & 7 or off < self._first or off + po > self._end):
            otype, flags, size = OBJECT_HEADER.unpack_from(self._buf, off)
            if otype == _DATA and size >= po and off + size <= self._end:
                return flags, size
        return self._object(off, ObjectType.DATA, po)

    def _data_object(self, off: int) -> tuple[bytes, int, int, int, int, int]:
        """Read the DATA object at ``off``: (payload, hash, next_hash, entry, entry_array, n_entries)."""
        po = self._data_payload
        flags, size = self._object(off, ObjectType.DATA, po)
        (_, _, _, h, next_hash, _nf, entry_off, array_off, n_entries) = DATA_OBJECT.unpack_from(
            self._buf, off
        )
        payload = self._buf[off + po : off + size]
        if flags:
            try:
                payload = decompress(flags, payload)
            except CorruptJournal as exc:
                raise CorruptJournal(exc.reason, offset=off) from None
        return payload, h, next_hash, entry_off, array_off, n_entries

    def _load_data(self, off: int) -> tuple[str, Value]:
        """Decode the DATA object at ``off`` to (field, value), keeping it if entries share it."""
        buf = self._buf
        flags, size = self._data_header(off)
        payload = buf[off + self._data_payload : off + size]
        if flags:
            try:
                payload = decompress(flags, payload)
            except CorruptJournal as exc:
                raise CorruptJournal(exc.reason, offset=off) from None
        eq = payload.find(b"=")
        if eq <= 0:
            raise CorruptJournal("DATA object payload is not FIELD=value", offset=off)
        raw_name = payload[:eq]
        name = self._names.get(raw_name)
        if name is None:
            name = self._names[raw_name] = raw_name.decode("utf-8", "surrogateescape")
        raw = payload[eq + 1 :]
        try:
            value: Value = raw.decode("utf-8")
        except UnicodeDecodeError:
            value = raw
        kv = (name, value)
        if len(raw) <= _CACHE_VALUE_LIMIT and _U64_AT.unpack_from(buf, off + _DATA_N_ENTRIES)[0] > 1:
            cache = self._cache
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            cache[off] = kv
        return kv

    def _field_value(self, off: int) -> tuple[str, Value]:
        """Decode the DATA object at ``off`` to (field, value), caching objects shared by entries."""
        return self._cache[off]

    # -- decoding some fields only ---------------------------------------------------------------

    def _selection(self, fields: Collection[str]) -> _Selection:
        key = fields if type(fields) is frozenset else frozenset(fields)
        sel = self._selections.get(key)
        if sel is None:
            sel = self._selections[key] = _Selection(key, self._lists_complete)
            self._walk(sel, _WALK_FIRST)
        return sel

    def _walk(self, sel: _Selection, steps: int) -> None:
        """Read up to ``steps`` more DATA objects from the wanted fields' FIELD data lists."""
        if not sel.walk:  # all read (closed), or not to be trusted or read at all
            return
        buf = self._buf
        known = sel.known
        try:
            while sel.walk and steps > 0:
                name = sel.walk[-1]
                off = sel.cursor
                if off is None:
                    field_off = self.find_field(name)
                    off = 0 if field_off is None else FIELD_OBJECT.unpack_from(buf, field_off)[5]
                while off and steps > 0:
                    kv = self._cache[off]
                    if kv[0] != name:
                        raise CorruptJournal(f"the data list of field {name} holds another field", offset=off)
                    if len(kv[1]) <= _CACHE_VALUE_LIMIT:
                        known[off] = kv
                    else:
                        known[off] = True
                        sel.has_large = True
                    self._touch(off)
                    off = _U64_AT.unpack_from(buf, off + _DATA_NEXT_FIELD)[0]
                    steps -= 1
                    sel.walked += 1
                    if sel.walked > self._chain_limit:
                        raise CorruptJournal(f"the data list of field {name} loops", offset=off)
                if off:
                    sel.cursor = off
                else:
                    sel.walk.pop()
                    sel.cursor = None
            if not sel.walk:
                sel.closed = True
            elif sel.walked >= _WALK_CAP or len(known) >= _CACHE_LIMIT:
                sel.give_up_walking()
        except CorruptJournal:
            sel.give_up_walking()

    def _probe(self, off: int, sel: _Selection) -> tuple[str, Value] | bool:
        """Whether the DATA object at ``off`` holds a wanted field: its (field, value) if so, else False.

        Reads the field name only, unless the payload is compressed. Objects shared by several
        entries are remembered; meanwhile the FIELD data lists are walked as far as probing has cost.
        """
        sel.probes += 1
        if sel.walk and sel.walked < _WALK_FIRST + 2 * sel.probes:
            self._walk(sel, 32)
            kv = sel.known.get(off)
            if kv is not None:
                return self._cache[off] if kv is True else kv
            if sel.closed:
                return False
        buf = self._buf
        flags, size = self._data_header(off)
        hit = self._cache.get(off)
        if hit is not None:
            wanted = hit[0] in sel.wanted
        elif flags:
            hit = self._cache[off]
            wanted = hit[0] in sel.wanted
        else:
            start = off + self._data_payload
            eq = buf.find(b"=", start, off + size)
            if eq <= start:
                raise CorruptJournal("DATA object payload is not FIELD=value", offset=off)
            wanted = buf[start:eq] in sel.wanted_raw
        kv: tuple[str, Value] | bool = self._cache[off] if wanted else False
        if _U64_AT.unpack_from(buf, off + _DATA_N_ENTRIES)[0] > 1:
            known = sel.known
            if len(known) >= _CACHE_LIMIT:
                known.clear()
                sel.give_up_walking()
            if kv is False or len(kv[1]) <= _CACHE_VALUE_LIMIT:  # type: ignore[index]
                known[off] = kv
        return kv

    def _select(self, items: Sequence[int], fields: Collection[str]) -> list[tuple[str, Value]]:
        """The (field, value) pairs of ``items`` whose field is in ``fields``, in item order."""
        sel = self._selection(fields)
        known = sel.known
        if sel.closed and not sel.has_large:
            return list(filter(None, map(known.get, items)))  # type: ignore[misc]
        pairs = []
        for item in items:
            kv = known.get(item)
            if kv is None:
                if sel.closed:
                    continue
                kv = self._probe(item, sel)
                if kv is False:
                    continue
            elif kv is False:
                continue
            if kv is True:
                kv = self._cache[item]
            pairs.append(kv)
        return pairs  # type: ignore[return-value]

    # -- entry arrays ----------------------------------------------------------------------------

    def _array_chain(self, first: int, limit: int | None) -> Iterator[tuple[int, ...]]:
        """Yield the item tuples of the entry arrays chained from ``first``, zero items dropped.

        ``limit`` caps the total number of items (a DATA object says how many it has). Entry offsets
        must increase strictly across the whole chain, and each array must lie after the previous.
        """
        buf = self._buf
        compact = self.compact
        width = 4 if compact else 8
        remaining = limit
        last_entry = 0
        off = first
        while off:
            _flags, size = self._object(off, ObjectType.ENTRY_ARRAY, ENTRY_ARRAY_ITEMS_OFFSET)
            _, _, _, nxt = ENTRY_ARRAY_OBJECT.unpack_from(buf, off)
            n = (size - ENTRY_ARRAY_ITEMS_OFFSET) // width
            if remaining is not None and n > remaining:
                n = remaining
            if compact:
                items = _unpack_u32(buf, off + ENTRY_ARRAY_ITEMS_OFFSET, n)
            else:
                items = _unpack_u64(buf, off + ENTRY_ARRAY_ITEMS_OFFSET, n)
            if items and items[-1] == 0:  # unused tail of the last array
                cut = items.index(0)
                items = items[:cut]
                nxt_ok = False
            else:
                nxt_ok = True
            if items:
                if items[0] <= last_entry or any(a >= b for a, b in itertools.pairwise(items)):
                    raise CorruptJournal(
                        "entry array is not strictly ascending (corrupt or a loop)", offset=off
                    )
                last_entry = items[-1]
                yield items
            if remaining is not None:
                remaining -= len(items)
                if remaining <= 0:
                    return
            if not nxt_ok:
                return
            if nxt and nxt <= off:
                raise CorruptJournal("entry array chain points backwards (a loop)", offset=off)
            off = nxt

    def entry_offsets(self) -> Iterator[int]:
        """Offsets of every entry, in file order, from the header's global entry-array chain."""
        for items in self._array_chain(self.header.entry_array_offset, None):
            yield from items

    def _data_entry_offsets(self, data_off: int) -> list[int]:
        _payload, _h, _nh, entry_off, array_off, n_entries = self._data_object(data_off)
        if n_entries == 0 or entry_off == 0:
            return []
        out = [entry_off]
        if n_entries > 1 and array_off:
            for items in self._array_chain(array_off, n_entries - 1):
                out.extend(items)
        if any(a >= b for a, b in itertools.pairwise(out)):
            raise CorruptJournal("DATA object's entries are not strictly ascending", offset=data_off)
        return out

    # -- hash table lookups ----------------------------------------------------------------------

    def _hash(self, payload: bytes) -> int:
        return journal_hash(payload, keyed=self.header.keyed_hash, file_id=self.header.file_id)

    def find_data(self, payload: bytes) -> int | None:
        """Offset of the DATA object holding exactly ``payload`` (``FIELD=value``), or None."""
        h = self.header
        h64 = self._hash(payload)
        n_buckets = h.data_hash_table_size // HASH_ITEM.size
        bucket_off = h.data_hash_table_offset + (h64 % n_buckets) * HASH_ITEM.size
        off, _tail = HASH_ITEM.unpack_from(self._buf, bucket_off)
        steps = 0
        while off:
            data, stored, nxt, _e, _a, _n = self._data_object(off)
            if stored == h64 and data == payload:
                return off
            steps += 1
            if (nxt and nxt <= off) or steps > _MAX_CHAIN:
                raise CorruptJournal("data hash chain loops", offset=off)
            off = nxt
        return None

    def find_field(self, name: str) -> int | None:
        """Offset of the FIELD object for ``name``, or None when no entry in the file has it."""
        h = self.header
        payload = name.encode()
        h64 = self._hash(payload)
        n_buckets = h.field_hash_table_size // HASH_ITEM.size
        off, _tail = HASH_ITEM.unpack_from(self._buf, h.field_hash_table_offset + (h64 % n_buckets) * 16)
        steps = 0
        while off:
            _flags, size = self._object(off, ObjectType.FIELD, FIELD_PAYLOAD_OFFSET)
            _, _, _, stored, nxt, _head = FIELD_OBJECT.unpack_from(self._buf, off)
            if stored == h64 and self._buf[off + FIELD_PAYLOAD_OFFSET : off + size] == payload:
                return off
            steps += 1
            if (nxt and nxt <= off) or steps > _MAX_CHAIN:
                raise CorruptJournal("field hash chain loops", offset=off)
            off = nxt
        return None

    def field_values(self, name: str) -> Iterator[Value]:
        """Every distinct value of field ``name`` in this file (via the FIELD object's DATA list)."""
        field_off = self.find_field(name)
        if field_off is None:
            return
        _, _, _, _h, _nh, off = FIELD_OBJECT.unpack_from(self._buf, field_off)
        seen: set[int] = set()
        while off:
            if off in seen or len(seen) > _MAX_CHAIN:
                raise CorruptJournal("field's data chain loops", offset=off)
            seen.add(off)
            payload, _h, _nh, _e, _a, _n = self._data_object(off)
            yield decode(payload[len(name) + 1 :])
            (next_field,) = struct.unpack_from("<Q", self._buf, off + 32)
            off = next_field

    def field_entry_offsets(self, name: str) -> set[int]:
        """Offsets of every entry that has field ``name`` at all (any value), via the FIELD object."""
        field_off = self.find_field(name)
        out: set[int] = set()
        if field_off is None:
            return out
        _, _, _, _h, _nh, off = FIELD_OBJECT.unpack_from(self._buf, field_off)
        steps = 0
        while off:
            out.update(self._data_entry_offsets(off))
            (nxt,) = struct.unpack_from("<Q", self._buf, off + 32)
            steps += 1
            if nxt == off or steps > _MAX_CHAIN:
                raise CorruptJournal("field's data chain loops", offset=off)
            off = nxt
        return out

    def match_offsets(
        self, matches: Mapping[str, Value | Sequence[Value]], without: Collection[str] = ()
    ) -> list[int]:
        """Sorted offsets of the entries matching ``matches``, found through the index.

        As with journalctl: values given for the same field are alternatives (OR), different
        fields must all match (AND). Values are ``str`` (encoded as UTF-8) or ``bytes``. Entries
        having any field named in ``without`` are left out (also found through the index).
        """
        result: set[int] | None = None
        for field, values in matches.items():
            if isinstance(values, (str, bytes)):
                values = [values]
            found: set[int] = set()
            prefix = field.encode() + b"="
            for value in values:
                raw = value.encode() if isinstance(value, str) else bytes(value)
                data_off = self.find_data(prefix + raw)
                if data_off is not None:
                    found.update(self._data_entry_offsets(data_off))
            result = found if result is None else result & found
            if not result:
                return []
        if result:
            for name in without:
                result -= self.field_entry_offsets(name)
        return sorted(result) if result else []

    # -- entries ---------------------------------------------------------------------------------

    def entry_key(self, off: int) -> EntryKey:
        """What cross-file ordering needs of the entry at ``off``."""
        self._object(off, ObjectType.ENTRY, ENTRY_ITEMS_OFFSET)
        self._touch(off)
        _, _, _, seqnum, realtime, monotonic, boot_id, xor_hash = ENTRY_OBJECT.unpack_from(self._buf, off)
        return (self.header.seqnum_id, seqnum, boot_id, monotonic, realtime, xor_hash)

    def entry_boot_and_time(self, off: int) -> tuple[bytes, int]:
        """(boot_id, realtime) of the entry at ``off``, without decoding its fields."""
        self._object(off, ObjectType.ENTRY, ENTRY_ITEMS_OFFSET)
        self._touch(off)
        _, _, _, _s, realtime, _m, boot_id, _x = ENTRY_OBJECT.unpack_from(self._buf, off)
        return boot_id, realtime

    def _entry_items(self, off: int) -> tuple[tuple[int, int, int, bytes, int], Sequence[int]]:
        """((seqnum, realtime, monotonic, boot_id, xor_hash), item offsets) of the entry at ``off``."""
        buf = self._buf
        if off & 7 or off < self._first or off + ENTRY_ITEMS_OFFSET > self._end:
            raise CorruptJournal("entry has an invalid offset", offset=off)
        otype, _flags, size, seqnum, realtime, monotonic, boot_id, xor_hash = ENTRY_OBJECT.unpack_from(
            buf, off
        )
        if otype != _ENTRY or size < ENTRY_ITEMS_OFFSET or off + size > self._end:
            raise CorruptJournal(f"expected an ENTRY object, found type {otype} size {size}", offset=off)
        n = (size - ENTRY_ITEMS_OFFSET) // self._item_size
        if self.compact:
            items: Sequence[int] = _unpack_u32(buf, off + ENTRY_ITEMS_OFFSET, n)
        else:
            items = _regular_items(buf, off + ENTRY_ITEMS_OFFSET, n)
        global _ticks
        _ticks += 1 if 0 <= off - self._last < _NEAR else _JUMP
        self._last = off
        if _ticks >= _GUARD_EVERY:
            _ticks = 0
            memory_guard()
        return (seqnum, realtime, monotonic, boot_id, xor_hash), items

    def _boot(self, boot_id: bytes) -> str:
        boot_hex = self._boot_hex.get(boot_id)
        if boot_hex is None:
            boot_hex = self._boot_hex[boot_id] = boot_id.hex()
        return boot_hex

    def entry(self, off: int, fields: Collection[str] | None = None) -> Entry:
        """Decode the entry at ``off``; with ``fields``, only those fields (metadata always)."""
        (seqnum, realtime, monotonic, boot_id, xor_hash), items = self._entry_items(off)
        boot_hex = self._boot_hex.get(boot_id)
        if boot_hex is None:
            boot_hex = self._boot_hex[boot_id] = boot_id.hex()
        pairs = list(map(self._cache.__getitem__, items)) if fields is None else self._select(items, fields)
        out: Entry = dict(pairs)
        if len(out) != len(pairs):  # a repeated field: collect its values in order
            out = _with_repeats(pairs, None)
        sid = self._seqnum_id_hex
        out["__CURSOR"] = f"s={sid};i={seqnum:x};b={boot_hex};m={monotonic:x};t={realtime:x};x={xor_hash:x}"
        out["__REALTIME_TIMESTAMP"] = realtime
        out["__MONOTONIC_TIMESTAMP"] = monotonic
        out["__SEQNUM"] = seqnum
        out["__SEQNUM_ID"] = sid
        # journalctl reports the boot id of the entry header, never a _BOOT_ID data field
        out["_BOOT_ID"] = boot_hex
        return out

    def fields_at(self, off: int, fields: Collection[str]) -> tuple[str, int, dict[str, FieldValue]]:
        """(boot id as hex, realtime, the named fields) of the entry at ``off``: no cursor, no more.

        What an analysis needs when ``entry(off, fields)`` would be more than it asks for; the hot
        path of indexed analyses, hence written out rather than shared with ``entry``.
        """
        global _ticks
        sel = self._selections.get(fields) if type(fields) is frozenset else None
        if sel is None:
            sel = self._selection(fields)
        buf = self._buf
        if off & 7 or off < self._first or off + ENTRY_ITEMS_OFFSET > self._end:
            raise CorruptJournal("entry has an invalid offset", offset=off)
        otype, _flags, size, _s, realtime, _m, boot_id, _x = ENTRY_OBJECT.unpack_from(buf, off)
        if otype != _ENTRY or size < ENTRY_ITEMS_OFFSET or off + size > self._end:
            raise CorruptJournal(f"expected an ENTRY object, found type {otype} size {size}", offset=off)
        n = (size - ENTRY_ITEMS_OFFSET) // self._item_size
        if self.compact:
            items: Sequence[int] = (_U32.get(n) or _layout(_U32, n, "I")).unpack_from(
                buf, off + ENTRY_ITEMS_OFFSET
            )
        else:
            items = _regular_items(buf, off + ENTRY_ITEMS_OFFSET, n)
        _ticks += 1 if 0 <= off - self._last < _NEAR else _JUMP
        self._last = off
        if _ticks >= _GUARD_EVERY:
            _ticks = 0
            memory_guard()
        if sel.closed and not sel.has_large:
            pairs = list(filter(None, map(sel.known.get, items)))
        else:
            pairs = self._select(items, fields)
        out = dict(pairs)
        if len(out) != len(pairs):
            out = _with_repeats(pairs, None)  # type: ignore[arg-type]
        boot_hex = self._boot_hex.get(boot_id)
        if boot_hex is None:
            boot_hex = self._boot_hex[boot_id] = boot_id.hex()
        return boot_hex, realtime, out  # type: ignore[return-value]

    def entries(self, fields: Collection[str] | None = None) -> Iterator[Entry]:
        """Every entry of this file alone, in file order."""
        entry = self.entry
        for items in self._array_chain(self.header.entry_array_offset, None):
            for off in items:
                yield entry(off, fields)

    def entries_at(self, offsets: Iterable[int], fields: Collection[str] | None = None) -> Iterator[Entry]:
        for off in offsets:
            yield self.entry(off, fields)
