"""One journal file, read by positioned reads and defensively.

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
a little at a time, in proportion to the work it saves, and given up past ``_WALK_READS`` page reads:
a list scattered over a large file costs a read per step), and until that list is complete it reads
just the name in front of the ``=`` of an item it does not know yet. A DATA object that is neither
wanted nor needed is then never read, so damage confined to it goes unnoticed by such a read.

Every DATA object whose payload a read uses is checked as ``journalctl --verify`` checks it: its
payload (decompressed) hashes to the hash stored with it (siphash24 keyed by the header's
``file_id`` in KEYED_HASH files, Jenkins lookup3 otherwise, see ``hashing``), its links are aligned
and its entry count agrees with its first entry; a DATA object met in a hash chain must belong to
that chain's bucket. A mismatch is damage (``HashMismatch``): a flipped bit in ``UNIT=ecs.service``
would otherwise make a lookup of that unit find nothing, and a flipped bit in a MESSAGE would be read
as another message. Each object is checked once per file read (the offsets checked are remembered),
and what one file read hashes is bounded (``HASH_BUDGET``). An ENTRY read must have sorted items, end
where the next object begins and, in a file closed cleanly, a sequence number inside the header's
range (``_check_items``): a compact item carries no hash, and a flipped bit in one can point it at
another valid DATA object.
A DATA object probed for its field name only (see above) is not hashed: that costs the whole payload
the selection saves. The FIELD data lists are what tells a wanted object from an unwanted one in a
file closed cleanly: a walk decodes their objects unchecked (most are never used) and each is
checked when an entry first uses it; an object on the list of another field is checked at once, and
if damaged it is damage to every entry that probes it later (its name may be the damaged part).

Everything a hostile file can claim is bounded: a DATA payload is read up to ``MAX_VALUE`` bytes
(compressed ones are decoded under the same cap, see ``compression``), one entry's newly decoded
values up to ``ENTRY_BUDGET``, its items up to ``MAX_ITEMS``; entry arrays are unpacked a chunk at a
time, the caches of decoded values and names are capped in bytes and in count, and an entry's
realtime stamp must be one systemd could have written. Past a bound the entry or lookup is a
problem (``CorruptJournal``), never an allocation the file asked for.

``check_structure`` is the cheap integrity check ``Journal`` runs before a file's first read (see
there): header, tail object, the global entry-array chain and the last entries, so that a torn file
is not taken as complete when only its index is read.

The file is never mapped: every byte comes from ``pread`` through a ``PagedBuffer`` (a bounded cache
of pages), whether the file is on this host, in a directory image or in a disk image. A journal can be
truncated while it is read (journald's vacuuming, a hostile image, a test), and a mapping of it then
kills the process with SIGBUS at the first touch past the new end, which no Python code can catch;
a short read instead raises ``FileShrank``, a ``CorruptJournal`` like any other damage. The cache also
bounds what a full scan keeps resident, where a mapping would count every page touched.
"""

from __future__ import annotations

import itertools
import operator
import os
import struct
from collections.abc import Collection, Iterator, Mapping, Sequence

from imagelint.facts.journal.compression import MAX_DECOMPRESSED, decompress, decompress_prefix
from imagelint.facts.journal.errors import CorruptJournal, HashMismatch
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
    OBJECT_HEADER_SIZE,
    JournalHeader,
    ObjectType,
    State,
    parse_header,
)
from imagelint.facts.journal.hashing import jenkins_hash64, siphash24
from imagelint.facts.journal.paged import PagedBuffer

TYPE_CHECKING = False
if TYPE_CHECKING:  # ``typing`` costs milliseconds to import and is needed for annotations only
    from typing import Any

    from imagelint.targets.interface import RandomAccessFile

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
_CACHE_BYTES = 16 * 1024 * 1024  # ... and the values kept add up to at most this much (then it starts over)
_MAX_CHAIN = 1_000_000  # hash-chain steps before we call it a loop
MAX_VALUE = MAX_DECOMPRESSED
"""The largest DATA payload (``FIELD=value``, uncompressed) read; a larger one is a problem on its entry."""
ENTRY_BUDGET = 2 * MAX_DECOMPRESSED
"""Bytes of values newly decoded for one entry; past it the entry is a problem (a hostile entry can
list one large object thousands of times)."""
HASH_BUDGET = 4 * MAX_DECOMPRESSED
"""Bytes of DATA payloads one file read may hash to check them: pure Python hashes 4-5 MB/s, so at
most about 15 s of CPU per file (a journald file is at most 128 MiB, its MESSAGEs a fraction of
that); past it every further object is a problem: out of budget, never read unchecked."""
MAX_ITEMS = 65_536
"""Items (fields) one entry may have; journald writes at most 1024 user fields plus its own."""
_PROBE_WHOLE = 4096  # compressed payloads up to this size are decoded whole when probed for their name
_NAME_MAX = 256  # field names are at most 64 bytes in journald; longer "names" are not wanted by anyone
_ENTRY_READ = 512  # bytes read at an entry: its header, ~100 compact or ~28 regular items, the next header
_ARRAY_CHUNK = 65_536  # entry-array items unpacked at a time (a hostile array can claim the whole file)
_IDS_KEPT = 65_536  # boot ids, field names and verified DATA offsets remembered per file, then forgotten
REALTIME_MAX = 1 << 55
"""An entry's realtime stamp must lie in (0, REALTIME_MAX) µs (about the year 3111), as systemd's
VALID_REALTIME demands of every entry it writes; any other stamp is damage (and no date to show)."""
_TAIL_CHECKED = 64  # the last entries whose headers the structure check reads (where a file tears)
_OBJECT_MINIMUM = {  # the smallest valid size of each object type (the compact DATA header is larger)
    int(ObjectType.DATA): DATA_PAYLOAD_OFFSET_REGULAR,
    int(ObjectType.FIELD): FIELD_PAYLOAD_OFFSET,
    int(ObjectType.ENTRY): ENTRY_ITEMS_OFFSET,
    int(ObjectType.DATA_HASH_TABLE): OBJECT_HEADER_SIZE,
    int(ObjectType.FIELD_HASH_TABLE): OBJECT_HEADER_SIZE,
    int(ObjectType.ENTRY_ARRAY): ENTRY_ARRAY_ITEMS_OFFSET,
    int(ObjectType.TAG): OBJECT_HEADER_SIZE,
}
_WALK_FIRST = 64  # FIELD data-list steps a field selection may take before any item is probed
_WALK_CAP = 16_384  # ... and at most, per field selection and file: past it, probing goes on alone
_WALK_READS = 256
"""Positioned reads a field selection's walk may cause per file, then probing goes on alone. The
objects on a list lie wherever their first entry was written: a list of one object per process
(``_PID``) costs about a page read per step, which thrashes the page cache across a large file and
learns mostly objects no entry read ever uses, while probing an entry's own items reads next to the
entry (a new value is written just before the first entry using it)."""
_DATA = int(ObjectType.DATA)
_LAST_TYPE = max(ObjectType)
_HEX = frozenset("0123456789abcdef")
_ENTRY = int(ObjectType.ENTRY)
_U64_AT = struct.Struct("<Q")
_U32_AT = struct.Struct("<I")
_DATA_HASH = 16  # DataObject.hash
_DATA_N_ENTRIES = 56  # DataObject.n_entries
_DATA_NEXT_FIELD = 32  # DataObject.next_field_offset
# struct layouts by item count, made when first needed (up to _STRUCTS_KEPT items they are kept)
_STRUCTS_KEPT = 256
_U32: dict[int, struct.Struct] = {}
_U64: dict[int, struct.Struct] = {}
Buffer = bytes | PagedBuffer  # what the reader slices: bytes, or cached pages of a file


_ITEMS_REGULAR: dict[int, struct.Struct] = {}  # regular entry items: the object offsets, hashes skipped


def _layout(table: dict[int, struct.Struct], n: int, fmt: str) -> struct.Struct:
    s = table.get(n)
    if s is None:
        s = struct.Struct("<" + fmt * n if len(fmt) > 1 else f"<{n}{fmt}")
        if n <= _STRUCTS_KEPT:
            table[n] = s
    return s


def _unpack_u32(buf: Buffer, off: int, n: int) -> tuple[int, ...]:
    s = _U32.get(n) or _layout(_U32, n, "I")
    return s.unpack(buf[off : off + s.size])


def _unpack_u64(buf: Buffer, off: int, n: int) -> tuple[int, ...]:
    s = _U64.get(n) or _layout(_U64, n, "Q")
    return s.unpack(buf[off : off + s.size])


def _regular_items(buf: Buffer, off: int, n: int) -> tuple[int, ...]:
    s = _ITEMS_REGULAR.get(n) or _layout(_ITEMS_REGULAR, n, "Q8x")
    return s.unpack(buf[off : off + s.size])


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

    __slots__ = (
        "closed",
        "cursor",
        "has_large",
        "known",
        "probes",
        "reads",
        "size",
        "unverified",
        "walk",
        "walked",
        "wanted",
        "wanted_raw",
    )

    def __init__(self, wanted: frozenset[str], walk: bool) -> None:
        self.wanted = wanted
        self.wanted_raw = frozenset(name.encode("utf-8", "surrogateescape") for name in wanted)
        self.known: dict[int, tuple[str, Value] | bool] = {}
        self.unverified: set[int] = set()  # offsets in ``known`` a walk decoded without their hash check
        self.closed = False
        self.has_large = False
        self.walk = sorted(wanted, reverse=True) if walk else []
        self.cursor: int | None = None
        self.probes = 0
        self.reads = 0  # positioned reads the walk caused
        self.walked = 0
        self.size = 0  # bytes of the values in ``known``

    def give_up_walking(self) -> None:
        self.walk = []
        self.closed = False


class JournalFile:
    """A read-only view of one journal file.

    Open with ``JournalFile.open(path)`` or ``JournalFile.from_file(fileobj, name)``; both validate
    the header (raising ``UnsupportedJournal`` or ``CorruptJournal``) before returning.
    """

    def __init__(self, buf: Buffer, name: str, file_size: int) -> None:
        self.name = name
        self._buf = buf
        self.file_size = file_size
        self.header: JournalHeader = parse_header(buf, file_size)
        h = self.header
        declared_end = h.header_size + h.arena_size
        self.truncated = file_size < declared_end
        self._end = min(file_size, declared_end)
        self._first = h.header_size
        # the last object: one past it, nothing need follow an object (clipped to what the file holds)
        self._tail = min(h.tail_object_offset, self._end - OBJECT_HEADER_SIZE)
        self.compact = h.compact
        self._item_size = ENTRY_ITEM_SIZE_COMPACT if self.compact else ENTRY_ITEM_SIZE_REGULAR
        self._data_payload = DATA_PAYLOAD_OFFSET_COMPACT if self.compact else DATA_PAYLOAD_OFFSET_REGULAR
        self._seqnum_id_hex = h.seqnum_id.hex()
        self._keyed = h.keyed_hash
        self._file_id = h.file_id
        self._cache = _DataCache(self._load_data)
        self._cache_bytes = 0  # bytes of values in ``_cache``
        self._spent = 0  # bytes of values decoded for the entry being read (see ``ENTRY_BUDGET``)
        self._checked: str | None = None  # the outcome of ``check_structure``, once run
        self._boot_hex: dict[bytes, str] = {}
        self._names: dict[bytes, str] = {}
        self._verified: set[int] = set()  # DATA objects whose payload matched its hash
        self._boot_data: dict[int, bytes] | None = None  # see ``_boot_objects``
        self._damaged: dict[int, str] = {}  # ... and those whose did not: why
        self._hashed = 0  # bytes of payloads hashed (see ``HASH_BUDGET``)
        self._selections: dict[frozenset[str], _Selection] = {}
        # a FIELD object's data list is trusted to be complete only in a file closed cleanly
        self._lists_complete = not self.truncated and h.state_name in ("offline", "archived")
        # ... and so are its head and tail sequence numbers (writers number entries in order)
        closed = self._lists_complete and h.n_entries
        self._seqnum_lo = h.head_entry_seqnum if closed else 1
        self._seqnum_hi = h.tail_entry_seqnum if closed else 1 << 64
        self._chain_limit = min(_MAX_CHAIN, h.n_data if h.n_data is not None else h.n_objects)

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> JournalFile:
        from imagelint.targets.rootfs import HostFile  # off the import path of an image's journal

        return cls.from_random(HostFile(os.open(path, os.O_RDONLY | os.O_CLOEXEC)), os.fspath(path))

    @classmethod
    def from_random(cls, f: RandomAccessFile, name: str) -> JournalFile:
        """Read a file a target (or ``open``) opened, through a bounded page cache of positioned
        reads; the size is the one ``f`` had when opened. Takes ``f`` over."""
        if f.size == 0:
            f.close()
            raise CorruptJournal("zero-length file")
        buf = PagedBuffer(f, f.size)
        try:
            return cls(buf, name, f.size)
        except Exception:
            buf.close()
            raise

    def close(self) -> None:
        self._cache.clear()
        self._selections.clear()
        self._verified.clear()
        self._damaged.clear()
        if not isinstance(self._buf, bytes):
            self._buf.close()

    def shrank(self) -> bool:
        """Whether the file is shorter now than when it was opened (truncated under the reader)."""
        return isinstance(self._buf, PagedBuffer) and not self._buf.whole()

    def __repr__(self) -> str:
        return f"JournalFile({self.name!r})"

    # -- objects -------------------------------------------------------------------------------

    def _check(self, off: int, minimum: int, what: str) -> None:
        if off & 7 or off < self._first or off + minimum > self._end:
            if off + minimum > self._end and self.truncated:
                raise CorruptJournal(f"{what} lies beyond the end of the truncated file", offset=off)
            raise CorruptJournal(f"{what} has an invalid offset", offset=off)

    def _object(self, off: int, expected: ObjectType, minimum: int) -> tuple[int, int]:
        """Validate the object header at ``off``; return (flags, size)."""
        self._check(off, minimum, expected.name.lower())
        otype, flags, size = OBJECT_HEADER.unpack(self._buf[off : off + OBJECT_HEADER.size])
        if otype != expected:
            raise CorruptJournal(f"expected a {expected.name} object, found type {otype}", offset=off)
        if size < minimum or off + size > self._end:
            raise CorruptJournal(f"{expected.name} object has an impossible size {size}", offset=off)
        return flags, size

    def _data_header(self, off: int) -> tuple[int, int]:
        """(flags, size) of the DATA object at ``off``, validated; the common case inline."""
        flags, size, _ = self._data_head(off, OBJECT_HEADER_SIZE)
        return flags, size

    def _data_head(self, off: int, length: int) -> tuple[int, int, bytes]:
        """(flags, size) of the DATA object at ``off``, validated, and its first ``length`` bytes (at
        most what the file holds) in the same read: a probe for the field name reads the header and
        the start of the payload at once."""
        po = self._data_payload
        if not (off & 7 or off < self._first or off + po > self._end):
            raw = self._buf[off : min(off + length, self._end)]
            otype, flags, size = OBJECT_HEADER.unpack_from(raw)
            if otype == _DATA and size >= po and off + size <= self._end:
                return flags, size, raw
        flags, size = self._object(off, ObjectType.DATA, po)  # raises: the checks above failed
        return flags, size, self._buf[off : min(off + length, off + size)]

    def _payload(self, off: int, flags: int, size: int, verify: bool = True) -> bytes:
        """The uncompressed payload of the DATA object at ``off`` (header already validated), checked
        against its hash unless ``verify`` is false (a FIELD walk: checked when used, see ``_walk``)."""
        start = off + self._data_payload
        if size - self._data_payload > MAX_VALUE:
            raise CorruptJournal(
                f"DATA object of {size} bytes is larger than the {MAX_VALUE}-byte limit", offset=off
            )
        payload = self._buf[start : off + size]
        if flags:
            try:
                payload = decompress(flags, payload, MAX_VALUE)
            except CorruptJournal as exc:
                raise CorruptJournal(exc.reason, offset=off) from None
        if verify and off not in self._verified:
            self._verify_data(off, payload)
        return payload

    def _verify_data(self, off: int, payload: bytes) -> None:
        """Check the DATA object at ``off`` as journalctl --verify does, given its decoded ``payload``:
        the stored hash is the payload's, its links are aligned, it has entries exactly when it
        names a first one. Remembered once it passes."""
        (_, _, _, stored, next_hash, next_field, entry_off, array_off, n_entries) = DATA_OBJECT.unpack(
            self._buf[off : off + DATA_OBJECT.size]
        )
        if (next_hash | next_field | entry_off | array_off) & 7:
            raise CorruptJournal("DATA object has a misaligned link", offset=off)
        if (entry_off == 0) != (n_entries == 0):
            raise CorruptJournal(
                f"DATA object counts {n_entries} entries but its first entry is at {entry_off}", offset=off
            )
        self._hashed += len(payload)
        if self._hashed > HASH_BUDGET:
            raise CorruptJournal(
                f"DATA payloads to check add up to more than the {HASH_BUDGET}-byte limit", offset=off
            )
        computed = self._hash(payload)
        if computed != stored:
            reason = (
                f"DATA object's payload does not match its hash (stored {stored:#018x}, "
                f"payload hashes to {computed:#018x})"
            )
            if len(self._damaged) < _IDS_KEPT:
                self._damaged[off] = reason
            raise HashMismatch(reason, offset=off)
        verified = self._verified
        if len(verified) >= _IDS_KEPT:
            verified.clear()
        verified.add(off)

    def _data_object(self, off: int) -> tuple[bytes, int, int, int, int, int]:
        """Read the DATA object at ``off``: (payload, hash, next_hash, entry, entry_array, n_entries)."""
        flags, size = self._object(off, ObjectType.DATA, self._data_payload)
        (_, _, _, h, next_hash, _nf, entry_off, array_off, n_entries) = DATA_OBJECT.unpack(
            self._buf[off : off + DATA_OBJECT.size]
        )
        return self._payload(off, flags, size), h, next_hash, entry_off, array_off, n_entries

    def _data_links(self, off: int) -> tuple[int, int, int, int, int]:
        """(hash, next_hash, entry, entry_array, n_entries) of the DATA object at ``off``, payload unread."""
        self._object(off, ObjectType.DATA, self._data_payload)
        (_, _, _, h, next_hash, _nf, entry_off, array_off, n_entries) = DATA_OBJECT.unpack(
            self._buf[off : off + DATA_OBJECT.size]
        )
        return h, next_hash, entry_off, array_off, n_entries

    def _payload_head(self, off: int, flags: int, size: int) -> bytes:
        """At least the first ``_NAME_MAX + 1`` bytes of a compressed DATA payload (all if shorter)."""
        if size - self._data_payload > MAX_VALUE:
            raise CorruptJournal(
                f"DATA object of {size} bytes is larger than the {MAX_VALUE}-byte limit", offset=off
            )
        try:
            return decompress_prefix(flags, self._buf[off + self._data_payload : off + size], _NAME_MAX + 1)
        except CorruptJournal as exc:
            raise CorruptJournal(exc.reason, offset=off) from None

    def _name(self, raw_name: bytes) -> str:
        names = self._names
        name = names.get(raw_name)
        if name is None:
            name = raw_name.decode("utf-8", "surrogateescape")
            if len(raw_name) <= _NAME_MAX:
                if len(names) >= _IDS_KEPT:
                    names.clear()
                names[raw_name] = name
        return name

    def _load_data(self, off: int, verify: bool = True) -> tuple[str, Value]:
        """Decode the DATA object at ``off`` to (field, value), keeping it if entries share it (and it
        was checked: ``verify``, see ``_payload``)."""
        buf = self._buf
        flags, size = self._data_header(off)
        payload = self._payload(off, flags, size, verify)
        eq = payload.find(b"=")
        if eq <= 0:
            raise CorruptJournal("DATA object payload is not FIELD=value", offset=off)
        n = len(payload) - eq - 1
        spent = self._spent + n
        if spent > ENTRY_BUDGET:
            self._spent = 0
            raise CorruptJournal(
                f"an entry's values add up to more than the {ENTRY_BUDGET}-byte limit", offset=off
            )
        self._spent = spent
        raw_name = payload[:eq]
        name = self._names.get(raw_name)
        if name is None:
            name = self._name(raw_name)
        value: Value
        if n <= _CACHE_VALUE_LIMIT:
            raw = payload[eq + 1 :]
            try:
                value = raw.decode("utf-8")
            except UnicodeDecodeError:
                value = raw
            kv = (name, value)
            if verify and _U64_AT.unpack(buf[off + _DATA_N_ENTRIES : off + _DATA_N_ENTRIES + 8])[0] > 1:
                cache = self._cache
                self._cache_bytes += n
                if len(cache) >= _CACHE_LIMIT or self._cache_bytes > _CACHE_BYTES:
                    cache.clear()
                    self._cache_bytes = n
                cache[off] = kv
            return kv
        # a large value: decoded from a view, so that no second copy of the payload is made
        view = memoryview(payload)[eq + 1 :]
        try:
            value = str(view, "utf-8")
        except UnicodeDecodeError:
            value = bytes(view)
        view.release()
        return name, value

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
        spent = self._spent  # what the walk decodes is not kept for an entry: not the entry's budget
        reads = buf.reads if isinstance(buf, PagedBuffer) else 0
        try:
            while sel.walk and steps > 0:
                name = sel.walk[-1]
                off = sel.cursor
                if off is None:
                    field_off = self.find_field(name)
                    off = (
                        0
                        if field_off is None
                        else FIELD_OBJECT.unpack(buf[field_off : field_off + FIELD_OBJECT.size])[5]
                    )
                while off and steps > 0:
                    kv = self._cache.get(off)
                    if kv is None:  # checked against its hash when an entry uses it, if one ever does
                        kv = self._load_data(off, verify=False)
                        if off not in self._verified:
                            sel.unverified.add(off)
                    if kv[0] != name:
                        self._check_data(off)  # a damaged name, or a damaged list
                        raise CorruptJournal(f"the data list of field {name} holds another field", offset=off)
                    if len(kv[1]) <= _CACHE_VALUE_LIMIT:
                        known[off] = kv
                        sel.size += len(kv[1])
                    else:
                        known[off] = True
                        sel.has_large = True
                    nxt = _U64_AT.unpack(buf[off + _DATA_NEXT_FIELD : off + _DATA_NEXT_FIELD + _U64_AT.size])[
                        0
                    ]
                    steps -= 1
                    sel.walked += 1
                    # writers put each new DATA object at the head of its field's list: offsets fall
                    if nxt >= off or sel.walked > self._chain_limit:
                        raise CorruptJournal(f"the data list of field {name} loops", offset=off)
                    off = nxt
                if off:
                    sel.cursor = off
                else:
                    sel.walk.pop()
                    sel.cursor = None
            if isinstance(buf, PagedBuffer):
                sel.reads += buf.reads - reads
            if not sel.walk:
                sel.closed = True
            elif (
                sel.walked >= _WALK_CAP
                or sel.reads >= _WALK_READS
                or len(known) >= _CACHE_LIMIT
                or sel.size > _CACHE_BYTES
            ):
                sel.give_up_walking()
        except CorruptJournal:  # a broken list or a damaged object on it: probe every item instead
            sel.give_up_walking()
        finally:
            self._spent = spent

    def _probe(self, off: int, sel: _Selection) -> tuple[str, Value] | bool:
        """Whether the DATA object at ``off`` holds a wanted field: its (field, value) if so, else False.

        Reads the field name only, unless the payload is compressed. Objects shared by several
        entries are remembered; meanwhile the FIELD data lists are walked as far as probing has cost.
        """
        sel.probes += 1
        if sel.walk and sel.walked < _WALK_FIRST + 2 * sel.probes:
            self._walk(sel, 32)
            got = sel.known.get(off)
            if got is not None:
                return self._cache[off] if got is True else got
            if sel.closed:
                return False
        damaged = self._damaged.get(off)
        if damaged is not None:  # met by a walk: its name is not to be trusted either
            raise HashMismatch(damaged, offset=off)
        flags, size, raw = self._data_head(off, self._data_payload + _NAME_MAX + 1)
        hit = self._cache.get(off)
        if hit is not None:
            wanted = hit[0] in sel.wanted
        elif flags and size - self._data_payload <= _PROBE_WHOLE:
            hit = self._cache[off]  # small: decoded whole (and kept if shared), as a wanted one would be
            wanted = hit[0] in sel.wanted
        elif flags:
            # the name only: a large compressed value of an unwanted field is never decoded whole
            head = self._payload_head(off, flags, size)
            eq = head.find(b"=")
            if eq == 0 or (eq < 0 and len(head) <= _NAME_MAX):
                raise CorruptJournal("DATA object payload is not FIELD=value", offset=off)
            wanted = eq > 0 and head[:eq] in sel.wanted_raw
        else:
            start = self._data_payload  # in ``raw``, which holds the first _NAME_MAX + 1 bytes of payload
            eq = raw.find(b"=", start, min(size, start + _NAME_MAX + 1))
            if eq == start or (eq < 0 and size <= start + _NAME_MAX):
                raise CorruptJournal("DATA object payload is not FIELD=value", offset=off)
            # no "=" in the first _NAME_MAX bytes: a name longer than any wanted one
            wanted = eq > 0 and raw[start:eq] in sel.wanted_raw
        kv: tuple[str, Value] | bool = self._cache[off] if wanted else False
        if _U64_AT.unpack_from(raw, _DATA_N_ENTRIES)[0] > 1:
            known = sel.known
            if len(known) >= _CACHE_LIMIT or sel.size > _CACHE_BYTES:
                known.clear()
                sel.unverified.clear()
                sel.size = 0
                sel.give_up_walking()
            if kv is False:
                known[off] = kv
            elif isinstance(kv, tuple) and len(kv[1]) <= _CACHE_VALUE_LIMIT:
                known[off] = kv
                sel.size += len(kv[1])
        return kv

    def _select(self, items: Sequence[int], fields: Collection[str]) -> list[tuple[str, Value]]:
        """The (field, value) pairs of ``items`` whose field is in ``fields``, in item order."""
        sel = self._selection(fields)
        known = sel.known
        if sel.closed and not sel.has_large:  # no True in ``known``: False and None filtered out
            found: list[Any] = list(filter(None, map(known.get, items)))
            if sel.unverified and not sel.unverified.isdisjoint(items):
                self._check_used(sel, items)
            return found
        pairs: list[tuple[str, Value]] = []
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
            pairs.append(self._cache[item] if kv is True else kv)
        if sel.unverified and not sel.unverified.isdisjoint(items):
            self._check_used(sel, items)
        return pairs

    def _check_used(self, sel: _Selection, items: Sequence[int]) -> None:
        """Check the objects a walk decoded unchecked that these items use (once each)."""
        for item in items:
            if item in sel.unverified:
                self._check_data(item)
                sel.unverified.discard(item)

    def _check_data(self, off: int) -> None:
        """Check the DATA object at ``off`` against its hash (once per file: see ``_payload``)."""
        flags, size = self._data_header(off)
        self._payload(off, flags, size)

    # -- entry arrays ----------------------------------------------------------------------------

    def _array_chain(self, first: int, limit: int | None) -> Iterator[tuple[int, ...]]:
        """Yield the items of the entry arrays chained from ``first`` (in tuples of at most
        ``_ARRAY_CHUNK``), stopping at the first zero item (the unused tail of the last array).

        ``limit`` caps the total number of items (a DATA object says how many it has). Entry offsets
        must increase strictly across the whole chain, and each array must lie after the previous.
        """
        buf = self._buf
        compact = self.compact
        width = 4 if compact else 8
        unpack = _unpack_u32 if compact else _unpack_u64
        remaining = limit
        last_entry = 0
        off = first
        while off:
            _flags, size = self._object(off, ObjectType.ENTRY_ARRAY, ENTRY_ARRAY_ITEMS_OFFSET)
            _, _, _, nxt = ENTRY_ARRAY_OBJECT.unpack(buf[off : off + ENTRY_ARRAY_OBJECT.size])
            n = (size - ENTRY_ARRAY_ITEMS_OFFSET) // width
            if remaining is not None and n > remaining:
                n = remaining
            pos = off + ENTRY_ARRAY_ITEMS_OFFSET
            while n > 0:
                k = n if n <= _ARRAY_CHUNK else _ARRAY_CHUNK
                items = unpack(buf, pos, k)
                pos += k * width
                n -= k
                end_of_chain = items[-1] == 0
                if end_of_chain:  # unused tail of the last array
                    items = items[: items.index(0)]
                if items:
                    if items[0] <= last_entry or any(map(operator.ge, items, items[1:])):
                        raise CorruptJournal(
                            "entry array is not strictly ascending (corrupt or a loop)", offset=off
                        )
                    last_entry = items[-1]
                    yield items
                    if remaining is not None:
                        remaining -= len(items)
                if end_of_chain:
                    return
            if remaining is not None and remaining <= 0:
                return
            if nxt and nxt <= off:
                raise CorruptJournal("entry array chain points backwards (a loop)", offset=off)
            off = nxt

    def entry_offsets(self) -> Iterator[int]:
        """Offsets of every entry, in file order, from the header's global entry-array chain."""
        for items in self._array_chain(self.header.entry_array_offset, None):
            yield from items

    def follow_offsets(
        self, array_off: int, index: int, last_entry: int, limit: int
    ) -> tuple[list[int], int, int]:
        """Entries linked into the global entry-array chain after a position: following a live file.

        The position is (``array_off``, ``index``): the entry array being read (0: none yet, start at
        the header's first one) and how many of its items were consumed; ``last_entry`` is the offset
        of the last entry already returned, which every new one must exceed. Returns at most
        ``limit`` offsets and the new position. A zero item (the unused tail of the last array) or an
        array beyond this mapping's end (the writer grew the file since it was mapped) ends the walk
        for now: the writer fills it in later. Damage raises ``CorruptJournal``, as elsewhere.
        """
        width = 4 if self.compact else 8
        unpack = _unpack_u32 if self.compact else _unpack_u64
        out: list[int] = []
        off = array_off or self.header.entry_array_offset
        if array_off == 0:
            index = 0
        while off and len(out) < limit:
            if off + ENTRY_ARRAY_ITEMS_OFFSET > self._end and not self.truncated:
                break
            _flags, size = self._object(off, ObjectType.ENTRY_ARRAY, ENTRY_ARRAY_ITEMS_OFFSET)
            nxt = ENTRY_ARRAY_OBJECT.unpack(self._buf[off : off + ENTRY_ARRAY_OBJECT.size])[3]
            n = (size - ENTRY_ARRAY_ITEMS_OFFSET) // width
            if index < n:
                k = min(n - index, limit - len(out))
                for item in unpack(self._buf, off + ENTRY_ARRAY_ITEMS_OFFSET + index * width, k):
                    if item == 0:
                        return out, off, index
                    if item <= last_entry:
                        raise CorruptJournal(
                            "entry array is not strictly ascending (corrupt or a loop)", offset=off
                        )
                    out.append(item)
                    last_entry = item
                    index += 1
                if index < n:
                    break
            if not nxt:
                break
            if nxt <= off:
                raise CorruptJournal("entry array chain points backwards (a loop)", offset=off)
            off, index = nxt, 0
        return out, off, index

    def _data_entry_offsets(self, data_off: int) -> list[int]:
        """The entries of the DATA object at ``data_off``: its first entry, then its entry-array chain.

        In a file closed cleanly the chain must hold exactly the object's count (a count cut short
        would hide entries); in one still being written, the count bounds what is read.
        """
        _h, _nh, entry_off, array_off, n_entries = self._data_links(data_off)
        if n_entries == 0 or entry_off == 0:
            if n_entries or entry_off:
                raise CorruptJournal("DATA object's entry count and first entry disagree", offset=data_off)
            return []
        out = [entry_off]
        exact = self._lists_complete
        if array_off and (n_entries > 1 or exact):
            for items in self._array_chain(array_off, None if exact else n_entries - 1):
                out.extend(items)
        if exact and len(out) != n_entries:
            raise CorruptJournal(
                f"DATA object counts {n_entries} entries but links {len(out)}", offset=data_off
            )
        # the chain is strictly ascending (``_array_chain`` checks it): only its head's link remains
        if len(out) > 1 and out[0] >= out[1]:
            raise CorruptJournal("DATA object's entries are not strictly ascending", offset=data_off)
        return out

    # -- hash table lookups ----------------------------------------------------------------------

    def _hash(self, payload: bytes) -> int:
        """``hashing.journal_hash`` for this file, its header's flag read once (every DATA object a
        read uses is hashed)."""
        return siphash24(payload, self._file_id) if self._keyed else jenkins_hash64(payload)

    def _chain_head(self, payload: bytes, table_offset: int, table_size: int) -> tuple[int, int, int, int]:
        """``payload``'s hash, the table's bucket count, its bucket and the first object of the
        bucket's chain (0: none), in the hash table at ``table_offset``."""
        h64 = self._hash(payload)
        n_buckets = table_size // HASH_ITEM.size
        bucket = h64 % n_buckets
        bucket_off = table_offset + bucket * HASH_ITEM.size
        head: int = HASH_ITEM.unpack(self._buf[bucket_off : bucket_off + HASH_ITEM.size])[0]
        return h64, n_buckets, bucket, head

    def find_data(self, payload: bytes) -> int | None:
        """Offset of the DATA object holding exactly ``payload`` (``FIELD=value``), or None."""
        h = self.header
        h64, n_buckets, bucket, off = self._chain_head(
            payload, h.data_hash_table_offset, h.data_hash_table_size
        )
        steps = 0
        while off:
            stored, nxt, _e, _a, _n = self._data_links(off)
            if stored % n_buckets != bucket:  # a damaged hash could hide the very object sought
                raise HashMismatch("DATA object's stored hash does not belong to its hash chain", offset=off)
            # the payload is checked against its hash when read, so a damaged one is never skipped
            if stored == h64 and self._data_object(off)[0] == payload:
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
        h64, n_buckets, bucket, off = self._chain_head(
            payload, h.field_hash_table_offset, h.field_hash_table_size
        )
        steps = 0
        while off:
            _flags, size = self._object(off, ObjectType.FIELD, FIELD_PAYLOAD_OFFSET)
            _, _, _, stored, nxt, _head = FIELD_OBJECT.unpack(self._buf[off : off + FIELD_OBJECT.size])
            if stored % n_buckets != bucket:
                raise HashMismatch("FIELD object's stored hash does not belong to its hash chain", offset=off)
            field = self._buf[off + FIELD_PAYLOAD_OFFSET : off + size]
            if stored == h64 and field == payload:
                return off
            if field == payload:  # the name sought, under another hash: a damaged hash or name
                raise HashMismatch("FIELD object's payload does not match its hash", offset=off)
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
        _, _, _, _h, _nh, off = FIELD_OBJECT.unpack(self._buf[field_off : field_off + FIELD_OBJECT.size])
        while off:
            payload, _h, _nh, _e, _a, _n = self._data_object(off)
            yield decode(payload[len(name) + 1 :])
            nxt = _U64_AT.unpack(self._buf[off + _DATA_NEXT_FIELD : off + _DATA_NEXT_FIELD + _U64_AT.size])[0]
            if nxt >= off:  # the list runs towards the start of the file (see ``_walk``)
                raise CorruptJournal("field's data chain loops", offset=off)
            off = nxt

    def _field_entry_lists(self, name: str) -> Iterator[list[int]]:
        """Per DATA object of field ``name`` (any value), the sorted offsets of its entries."""
        field_off = self.find_field(name)
        if field_off is None:
            return
        _, _, _, _h, _nh, off = FIELD_OBJECT.unpack(self._buf[field_off : field_off + FIELD_OBJECT.size])
        while off:
            yield self._data_entry_offsets(off)
            nxt = _U64_AT.unpack(self._buf[off + _DATA_NEXT_FIELD : off + _DATA_NEXT_FIELD + _U64_AT.size])[0]
            if nxt >= off:  # the list runs towards the start of the file (see ``_walk``)
                raise CorruptJournal("field's data chain loops", offset=off)
            off = nxt

    def match_offsets(
        self, matches: Mapping[str, Value | Sequence[Value]], without: Collection[str] = ()
    ) -> list[int]:
        """Sorted offsets of the entries matching ``matches``, found through the index.

        As with journalctl: values given for the same field are alternatives (OR), different
        fields must all match (AND). Values are ``str`` (encoded as UTF-8) or ``bytes``. Entries
        having any field named in ``without`` are left out (also found through the index).

        Every DATA object's entry list is read in full (and checked); a single value's list, sorted
        already, is used as it is, and an AND keeps only the smaller side as a set, so a value that
        most entries share (``_UID=0``) costs its reading, not a set of every entry.
        """
        result: list[int] | set[int] | None = None
        for field, values in matches.items():
            if isinstance(values, (str, bytes)):
                values = [values]
            found: list[int] | set[int] = []
            prefix = field.encode() + b"="
            for value in values:
                raw = value.encode() if isinstance(value, str) else bytes(value)
                data_off = self.find_data(prefix + raw)
                if data_off is not None:
                    offsets = self._data_entry_offsets(data_off)
                    if not found:
                        found = offsets
                    else:
                        found = found if isinstance(found, set) else set(found)
                        found.update(offsets)
            if result is None:
                result = found
            else:
                small, large = (result, found) if len(result) <= len(found) else (found, result)
                result = (small if isinstance(small, set) else set(small)).intersection(large)
            if not result:
                return []
        if not result:
            return []
        if without:
            left = result if isinstance(result, set) else set(result)
            for name in without:
                for offsets in self._field_entry_lists(name):
                    left.difference_update(offsets)
            return sorted(left)
        return sorted(result) if isinstance(result, set) else result

    # -- structure check -------------------------------------------------------------------------

    def check_structure(self) -> str | None:
        """Why this file is torn or damaged where an indexed read would not notice, or None.

        Run once per file (the outcome is kept); see ``_check_structure`` for what is checked.
        """
        if self._checked is None:
            try:
                self._check_structure()
                self._checked = ""
            except CorruptJournal as exc:
                self._checked = str(exc)
        return self._checked or None

    def _check_structure(self) -> None:
        """Check what a torn or damaged file breaks, reading only the header, the tail object, the
        global entry-array chain and the first and last entries' headers (no DATA object at all).

        * the header's tail object lies inside the file and has a valid object header;
        * the entry-array chain from the header is made of ENTRY_ARRAY objects inside the file, each
          after the previous (so no loop) and no later than the tail object; writers fill each array
          before they link the next, so every array but the last is full (its first and last items
          are read: aligned, in ascending order across the chain, inside the file's objects) and the
          last one's used part is found by bisection (items, then zeros to its end);
        * the chain holds as many entries as the header counts (in a file still online, a writer may
          have linked more since: only the header's count is read, and it must be there in full);
        * the last ``_TAIL_CHECKED`` items are aligned, strictly ascending and inside the objects,
          and they and the first are valid ENTRY objects with plausible realtime stamps, strictly
          increasing sequence numbers and, within one boot, non-decreasing monotonic times; in a
          file closed cleanly the first and last match the header's head and tail sequence numbers
          and realtime stamps (as ``journalctl --verify`` requires).

        The cost grows with the number of entry arrays (a few dozen), not with the entries.
        Raises ``CorruptJournal`` with the first inconsistency met.
        """
        h = self.header
        buf = self._buf
        online = h.state == State.ONLINE
        tail = h.tail_object_offset
        if h.n_objects or tail:
            if tail & 7 or tail < self._first or tail + OBJECT_HEADER_SIZE > self._end:
                raise CorruptJournal("the header's tail object lies outside the file", offset=tail)
            otype, _flags, size = OBJECT_HEADER.unpack(buf[tail : tail + OBJECT_HEADER.size])
            minimum = _OBJECT_MINIMUM.get(otype)
            if minimum is None or size < minimum or tail + size > self._end:
                raise CorruptJournal(
                    f"the header's tail object is not a valid object (type {otype}, size {size})", offset=tail
                )
        elif h.n_entries or h.entry_array_offset:
            raise CorruptJournal("the header counts entries but no objects")
        width = 4 if self.compact else 8
        item = _U32_AT if self.compact else _U64_AT
        want = h.n_entries
        found = 0
        last_entry = 0
        spans: list[tuple[int, int]] = []  # (position of the first item, used items) per array
        prev = 0
        off = h.entry_array_offset
        while off and not (online and found >= want):
            if off <= prev:
                raise CorruptJournal("the entry array chain points backwards (a loop)", offset=off)
            if off > tail:
                raise CorruptJournal("an entry array lies beyond the header's tail object", offset=off)
            _flags, size = self._object(off, ObjectType.ENTRY_ARRAY, ENTRY_ARRAY_ITEMS_OFFSET)
            nxt = ENTRY_ARRAY_OBJECT.unpack(buf[off : off + ENTRY_ARRAY_OBJECT.size])[3]
            pos = off + ENTRY_ARRAY_ITEMS_OFFSET
            n = (size - ENTRY_ARRAY_ITEMS_OFFSET) // width
            if n == 0:
                raise CorruptJournal("an entry array has no room for items", offset=off)
            used = n
            if (
                item.unpack(buf[pos + (n - 1) * width : pos + (n - 1) * width + item.size])[0] == 0
            ):  # the unused end of the last array
                lo, hi = 0, n - 1  # the first zero item lies in [lo, hi]
                while lo < hi:
                    mid = (lo + hi) // 2
                    if item.unpack(buf[pos + mid * width : pos + mid * width + item.size])[0]:
                        lo = mid + 1
                    else:
                        hi = mid
                used = lo
                if nxt:
                    raise CorruptJournal("the entry array chain goes on after an unused item", offset=off)
            if online and found + used > want:
                used = want - found
            if used:
                first = item.unpack(buf[pos : pos + item.size])[0]
                last = item.unpack(buf[pos + (used - 1) * width : pos + (used - 1) * width + item.size])[0]
                if first <= last_entry or last < first or (first | last) & 7:
                    raise CorruptJournal("entry array items are not aligned and ascending", offset=off)
                if first < self._first or last > tail:
                    raise CorruptJournal("an entry array points outside the file's objects", offset=off)
                last_entry = last
                spans.append((pos, used))
                found += used
            prev = off
            off = nxt if used == n else 0
        if found != want:
            raise CorruptJournal(f"the header counts {want} entries but its entry arrays hold {found}")
        if not found:
            return
        recent: list[int] = []  # the last items, gathered backwards across the arrays
        for pos, used in reversed(spans):
            k = min(used, _TAIL_CHECKED - len(recent))
            unpack = _unpack_u32 if self.compact else _unpack_u64
            recent[:0] = unpack(buf, pos + (used - k) * width, k)
            if len(recent) >= _TAIL_CHECKED:
                break
        first_entry = item.unpack(buf[spans[0][0] : spans[0][0] + item.size])[0]
        if any(a >= b for a, b in itertools.pairwise(recent)) or any(o & 7 for o in recent):
            raise CorruptJournal("the last entry array items are not aligned and strictly ascending")
        if recent[0] < self._first or recent[-1] > tail:
            raise CorruptJournal("an entry array points outside the file's objects", offset=recent[0])
        tail_heads = [self._entry_head(o) for o in recent]
        heads = tail_heads if first_entry == recent[0] else [self._entry_head(first_entry), *tail_heads]
        if any(a[0] >= b[0] for a, b in itertools.pairwise(heads)):
            raise CorruptJournal("entry sequence numbers are not strictly increasing", offset=last_entry)
        if any(a[3] == b[3] and a[2] > b[2] for a, b in itertools.pairwise(tail_heads)):
            raise CorruptJournal("entry monotonic times run backwards within a boot", offset=last_entry)
        if online:
            if heads[-1][0] > h.tail_entry_seqnum:
                raise CorruptJournal("the last entry is newer than the header's tail", offset=last_entry)
            return
        if (heads[0][0], heads[0][1]) != (h.head_entry_seqnum, h.head_entry_realtime):
            raise CorruptJournal("the first entry does not match the header's head entry", offset=first_entry)
        if (heads[-1][0], heads[-1][1]) != (h.tail_entry_seqnum, h.tail_entry_realtime):
            raise CorruptJournal("the last entry does not match the header's tail entry", offset=last_entry)

    def _entry_head(self, off: int) -> tuple[int, int, int, bytes]:
        """(seqnum, realtime, monotonic, boot_id) of the ENTRY object at ``off``, its header validated."""
        self._check(off, ENTRY_ITEMS_OFFSET, "entry")
        otype, _flags, size, seqnum, realtime, monotonic, boot_id, _x = ENTRY_OBJECT.unpack(
            self._buf[off : off + ENTRY_OBJECT.size]
        )
        if (
            otype != _ENTRY
            or size < ENTRY_ITEMS_OFFSET
            or off + size > self._end
            or (size - ENTRY_ITEMS_OFFSET) % self._item_size
            or (size - ENTRY_ITEMS_OFFSET) // self._item_size > MAX_ITEMS
        ):
            raise CorruptJournal(f"expected an ENTRY object, found type {otype} size {size}", offset=off)
        if not 0 < realtime < REALTIME_MAX:
            raise CorruptJournal(f"entry has an impossible realtime stamp {realtime}", offset=off)
        return seqnum, realtime, monotonic, boot_id

    # -- entries ---------------------------------------------------------------------------------

    def entry_key(self, off: int) -> EntryKey:
        """What cross-file ordering needs of the entry at ``off``."""
        self._object(off, ObjectType.ENTRY, ENTRY_ITEMS_OFFSET)
        _, _, _, seqnum, realtime, monotonic, boot_id, xor_hash = ENTRY_OBJECT.unpack(
            self._buf[off : off + ENTRY_OBJECT.size]
        )
        if not 0 < realtime < REALTIME_MAX:
            raise CorruptJournal(f"entry has an impossible realtime stamp {realtime}", offset=off)
        return (self.header.seqnum_id, seqnum, boot_id, monotonic, realtime, xor_hash)

    def entry_boot_and_time(self, off: int) -> tuple[bytes, int]:
        """(boot_id, realtime) of the entry at ``off``, without decoding its fields."""
        self._object(off, ObjectType.ENTRY, ENTRY_ITEMS_OFFSET)
        _, _, _, _s, realtime, _m, boot_id, _x = ENTRY_OBJECT.unpack(self._buf[off : off + ENTRY_OBJECT.size])
        if not 0 < realtime < REALTIME_MAX:
            raise CorruptJournal(f"entry has an impossible realtime stamp {realtime}", offset=off)
        return boot_id, realtime

    def _entry_items(self, off: int) -> tuple[tuple[int, int, int, bytes, int], Sequence[int]]:
        """((seqnum, realtime, monotonic, boot_id, xor_hash), item offsets) of the entry at ``off``.

        One read of ``_ENTRY_READ`` bytes holds a usual entry's header, its items and the header of
        the object after it (what ``_check_items`` looks at); a larger entry reads the rest apart.
        """
        buf = self._buf
        if off & 7 or off < self._first or off + ENTRY_ITEMS_OFFSET > self._end:
            raise CorruptJournal("entry has an invalid offset", offset=off)
        head = buf[off : min(off + _ENTRY_READ, self._end)]
        otype, _flags, size, seqnum, realtime, monotonic, boot_id, xor_hash = ENTRY_OBJECT.unpack_from(head)
        if (
            otype != _ENTRY
            or size <= ENTRY_ITEMS_OFFSET  # an entry without items is not one (journalctl --verify)
            or off + size > self._end
            or (size - ENTRY_ITEMS_OFFSET) % self._item_size
        ):
            raise CorruptJournal(f"expected an ENTRY object, found type {otype} size {size}", offset=off)
        if not 0 < realtime < REALTIME_MAX:
            raise CorruptJournal(f"entry has an impossible realtime stamp {realtime}", offset=off)
        n = (size - ENTRY_ITEMS_OFFSET) // self._item_size
        if n > MAX_ITEMS:
            raise CorruptJournal(f"entry has {n} items, more than the limit of {MAX_ITEMS}", offset=off)
        source, at = (head, ENTRY_ITEMS_OFFSET) if size <= len(head) else (buf, off + ENTRY_ITEMS_OFFSET)
        if self.compact:
            items: Sequence[int] = _unpack_u32(source, at, n)
        else:
            items = _regular_items(source, at, n)
        self._check_items(off, size, seqnum, boot_id, items, head)
        self._spent = 0
        return (seqnum, realtime, monotonic, boot_id, xor_hash), items

    def _check_items(
        self, off: int, size: int, seqnum: int, boot_id: bytes, items: Sequence[int], head: bytes
    ) -> None:
        """What an entry must be, cheaply checked before any item is read: its items sorted offsets
        past the header (writers sort them); its size ending where the next object begins (objects
        are packed, so a damaged size that drops items lands inside them); in a file closed cleanly,
        its sequence number within the header's head and tail; its boot id the one its ``_BOOT_ID``
        item names, when it has one (what the analyses group by: journalctl shows the header's).
        A flipped bit in an item, which could point at another valid DATA object, often breaks the
        order."""
        if not self._seqnum_lo <= seqnum <= self._seqnum_hi:
            raise CorruptJournal(f"entry sequence number {seqnum} is outside the file's range", offset=off)
        if items[0] < self._first or any(map(operator.gt, items, items[1:])):
            raise CorruptJournal("entry items are not sorted object offsets", offset=off)
        nxt = off + ((size + 7) & ~7)
        if nxt <= self._tail:
            raw = head[nxt - off : nxt - off + OBJECT_HEADER_SIZE]  # ``head``: the bytes read from ``off``
            if len(raw) < OBJECT_HEADER_SIZE:  # an entry longer than that read
                raw = self._buf[nxt : nxt + OBJECT_HEADER_SIZE]
            otype, _flags, next_size = OBJECT_HEADER.unpack(raw)
            if not 0 < otype <= _LAST_TYPE or next_size < OBJECT_HEADER_SIZE or nxt + next_size > self._end:
                raise CorruptJournal(f"entry size {size} does not end where an object begins", offset=off)
        boots = self._boot_data if self._boot_data is not None else self._boot_objects()
        if boots:
            # one _BOOT_ID object per boot: look each up among the items rather than every item up
            if len(boots) <= 8:
                named = [b for o, b in boots.items() if o in items]
            else:
                named = [b for b in map(boots.get, items) if b is not None]
            if named and boot_id not in named:
                raise CorruptJournal("entry's boot id is not the one its _BOOT_ID field names", offset=off)

    def _boot_objects(self) -> dict[int, bytes]:
        """The DATA objects of field ``_BOOT_ID`` (offset → the boot id named), from the FIELD's data
        list, read once per file (one object per boot; at most ``_IDS_KEPT``) in a file closed cleanly
        (the list of one torn or cut starts where nothing may be left). Damage on the list is a
        problem once, then entries go unchecked against it."""
        found: dict[int, bytes] = {}
        self._boot_data = found
        try:
            if self._lists_complete:
                self._walk_boot_ids(found)
        except CorruptJournal:
            self._boot_data = {}
            raise
        return found

    def _walk_boot_ids(self, found: dict[int, bytes]) -> None:
        field_off = self.find_field("_BOOT_ID")
        if field_off is None:
            return
        off = FIELD_OBJECT.unpack(self._buf[field_off : field_off + FIELD_OBJECT.size])[5]
        while off and len(found) < _IDS_KEPT:
            name, value = self._cache[off]
            if name != "_BOOT_ID":
                raise CorruptJournal("the data list of field _BOOT_ID holds another field", offset=off)
            if isinstance(value, str) and len(value) == 32 and _HEX.issuperset(value):
                found[off] = bytes.fromhex(value)
            nxt = _U64_AT.unpack(self._buf[off + _DATA_NEXT_FIELD : off + _DATA_NEXT_FIELD + _U64_AT.size])[0]
            if nxt >= off:  # the list runs towards the start of the file (see ``_walk``)
                raise CorruptJournal("field's data chain loops", offset=off)
            off = nxt

    def _boot(self, boot_id: bytes) -> str:
        memo = self._boot_hex
        boot_hex = memo.get(boot_id)
        if boot_hex is None:
            if len(memo) >= _IDS_KEPT:
                memo.clear()
            boot_hex = memo[boot_id] = boot_id.hex()
        return boot_hex

    def entry(self, off: int, fields: Collection[str] | None = None) -> Entry:
        """Decode the entry at ``off``; with ``fields``, only those fields (metadata always)."""
        (seqnum, realtime, monotonic, boot_id, xor_hash), items = self._entry_items(off)
        boot_hex = self._boot_hex.get(boot_id) or self._boot(boot_id)
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

        What an analysis needs when ``entry(off, fields)`` would be more than it asks for: the hot
        path of indexed analyses.
        """
        sel = self._selections.get(fields) if type(fields) is frozenset else None
        if sel is None:
            sel = self._selection(fields)
        (_seq, realtime, _m, boot_id, _x), items = self._entry_items(off)
        pairs: list[Any]
        if sel.closed and not sel.has_large:
            pairs = list(filter(None, map(sel.known.get, items)))
            if sel.unverified and not sel.unverified.isdisjoint(items):
                self._check_used(sel, items)
        else:
            pairs = self._select(items, fields)
        out: dict[str, Any] = dict(pairs)
        if len(out) != len(pairs):
            out = _with_repeats(pairs, None)
        boot_hex = self._boot_hex.get(boot_id) or self._boot(boot_id)
        return boot_hex, realtime, out

    def entries(self, fields: Collection[str] | None = None) -> Iterator[Entry]:
        """Every entry of this file alone, in file order."""
        entry = self.entry
        for items in self._array_chain(self.header.entry_array_offset, None):
            for off in items:
                yield entry(off, fields)
