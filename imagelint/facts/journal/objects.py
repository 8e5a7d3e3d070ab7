"""One journal file's objects, read defensively: bounds, object headers and DATA payloads.

``ObjectReader`` holds what every part of the reader shares: the file's pages (a ``PagedBuffer``,
see ``paged``), its header and the bounds every offset is checked against before it is read:
8-byte aligned, inside the used part of the file (header plus arena, clipped to the real file size),
pointing at an object of the expected type and of a plausible size. Any inconsistency raises
``CorruptJournal``.

A DATA object's payload is read up to ``MAX_VALUE`` bytes (compressed ones are decoded under the
same cap, see ``compression``) and, once per file read, checked as ``journalctl --verify`` checks
it: its payload (decompressed) hashes to the hash stored with it (siphash24 keyed by the header's
``file_id`` in KEYED_HASH files, Jenkins lookup3 otherwise, see ``hashing``), its links are aligned
and its entry count agrees with its first entry. A mismatch is damage (``HashMismatch``), remembered
with its reason; what one file read hashes is bounded (``HASH_BUDGET``), and past it every further
object is a problem, never read unchecked.

DATA objects decode to (field, value) pairs (``decode`` for the value types). Those referenced by
more than one entry are decoded once and kept (``_DataCache``, capped in bytes and in count); unique
ones (a MESSAGE) are not, so memory stays flat. What one entry newly decodes is bounded too
(``ENTRY_BUDGET``): a hostile entry can list one large object thousands of times.
"""

from __future__ import annotations

import struct

from imagelint.facts.journal.compression import MAX_DECOMPRESSED, decompress, decompress_prefix
from imagelint.facts.journal.errors import CorruptJournal, HashMismatch
from imagelint.facts.journal.format import (
    DATA_OBJECT,
    DATA_PAYLOAD_OFFSET_COMPACT,
    DATA_PAYLOAD_OFFSET_REGULAR,
    ENTRY_ITEM_SIZE_COMPACT,
    ENTRY_ITEM_SIZE_REGULAR,
    OBJECT_HEADER,
    OBJECT_HEADER_SIZE,
    JournalHeader,
    ObjectType,
    parse_header,
)
from imagelint.facts.journal.hashing import jenkins_hash64, siphash24
from imagelint.facts.journal.paged import PagedBuffer

Value = str | bytes
"""A field value: ``str`` when the bytes are valid UTF-8, else the raw ``bytes``."""

CACHE_LIMIT = 200_000  # decoded shared DATA objects kept per file
CACHE_VALUE_LIMIT = 65_536  # larger values are decoded every time rather than kept
CACHE_BYTES = 16 * 1024 * 1024  # ... and the values kept add up to at most this much (then it starts over)
MAX_VALUE = MAX_DECOMPRESSED
"""The largest DATA payload (``FIELD=value``, uncompressed) read; a larger one is a problem on its entry."""
ENTRY_BUDGET = 2 * MAX_DECOMPRESSED
"""Bytes of values newly decoded for one entry; past it the entry is a problem (a hostile entry can
list one large object thousands of times)."""
HASH_BUDGET = 4 * MAX_DECOMPRESSED
"""Bytes of DATA payloads one file read may hash to check them: pure Python hashes 4-5 MB/s, so at
most about 15 s of CPU per file (a journald file is at most 128 MiB, its MESSAGEs a fraction of
that); past it every further object is a problem: out of budget, never read unchecked."""
NAME_MAX = 256  # field names are at most 64 bytes in journald; longer "names" are not wanted by anyone
IDS_KEPT = 65_536  # boot ids, field names and verified DATA offsets remembered per file, then forgotten
_DATA = int(ObjectType.DATA)
U64_AT = struct.Struct("<Q")
DATA_N_ENTRIES = 56  # DataObject.n_entries
_DATA_NEXT_FIELD = 32  # DataObject.next_field_offset


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


class ObjectReader:
    """The objects of one journal file, validated as they are read (the base of ``JournalFile``)."""

    def __init__(self, buf: PagedBuffer, name: str, file_size: int) -> None:
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
        self._keyed = h.keyed_hash
        self._file_id = h.file_id
        self._cache = _DataCache(self._load_data)
        self._cache_bytes = 0  # bytes of values in ``_cache``
        self._spent = 0  # bytes of values decoded for the entry being read (see ``ENTRY_BUDGET``)
        self._names: dict[bytes, str] = {}
        self._verified: set[int] = set()  # DATA objects whose payload matched its hash
        self._damaged: dict[int, str] = {}  # ... and those whose did not: why
        self._hashed = 0  # bytes of payloads hashed (see ``HASH_BUDGET``)
        # a FIELD object's data list is trusted to be complete only in a file closed cleanly
        self._lists_complete = not self.truncated and h.state_name in ("offline", "archived")

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
            if len(self._damaged) < IDS_KEPT:
                self._damaged[off] = reason
            raise HashMismatch(reason, offset=off)
        verified = self._verified
        if len(verified) >= IDS_KEPT:
            verified.clear()
        verified.add(off)

    def _data_links(self, off: int) -> tuple[int, int, int, int, int]:
        """(hash, next_hash, entry, entry_array, n_entries) of the DATA object at ``off``, payload unread."""
        self._object(off, ObjectType.DATA, self._data_payload)
        (_, _, _, h, next_hash, _nf, entry_off, array_off, n_entries) = DATA_OBJECT.unpack(
            self._buf[off : off + DATA_OBJECT.size]
        )
        return h, next_hash, entry_off, array_off, n_entries

    def _payload_head(self, off: int, flags: int, size: int) -> bytes:
        """At least the first ``NAME_MAX + 1`` bytes of a compressed DATA payload (all if shorter)."""
        if size - self._data_payload > MAX_VALUE:
            raise CorruptJournal(
                f"DATA object of {size} bytes is larger than the {MAX_VALUE}-byte limit", offset=off
            )
        try:
            return decompress_prefix(flags, self._buf[off + self._data_payload : off + size], NAME_MAX + 1)
        except CorruptJournal as exc:
            raise CorruptJournal(exc.reason, offset=off) from None

    def _name(self, raw_name: bytes) -> str:
        names = self._names
        name = names.get(raw_name)
        if name is None:
            name = raw_name.decode("utf-8", "surrogateescape")
            if len(raw_name) <= NAME_MAX:
                if len(names) >= IDS_KEPT:
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
        if n <= CACHE_VALUE_LIMIT:
            raw = payload[eq + 1 :]
            try:
                value = raw.decode("utf-8")
            except UnicodeDecodeError:
                value = raw
            kv = (name, value)
            if verify and U64_AT.unpack(buf[off + DATA_N_ENTRIES : off + DATA_N_ENTRIES + 8])[0] > 1:
                cache = self._cache
                self._cache_bytes += n
                if len(cache) >= CACHE_LIMIT or self._cache_bytes > CACHE_BYTES:
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

    def _checked_payload(self, off: int) -> bytes:
        """The payload of the DATA object at ``off``, checked against its hash (once per file: see
        ``_payload``)."""
        flags, size = self._data_header(off)
        return self._payload(off, flags, size)

    def _next_field(self, off: int) -> int:
        """The next DATA object on the FIELD data list of the DATA object at ``off`` (0: none)."""
        at = off + _DATA_NEXT_FIELD
        nxt: int = U64_AT.unpack(self._buf[at : at + U64_AT.size])[0]
        return nxt

    def _hash(self, payload: bytes) -> int:
        """``hashing.journal_hash`` for this file, its header's flag read once (every DATA object a
        read uses is hashed)."""
        return siphash24(payload, self._file_id) if self._keyed else jenkins_hash64(payload)
