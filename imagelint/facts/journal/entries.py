"""Entry decoding: an ENTRY object turned into its fields, its metadata and its cursor.

An ENTRY object's items point at (possibly compressed) DATA objects; ``entry`` decodes them all, or
with ``fields`` only those (see ``selection``), to a dict (see ``objects.decode`` for the value
types) with the metadata keys in ``META_FIELDS``. One read of ``_ENTRY_READ`` bytes usually holds
an entry's header, its items and the header of the object after it.

An entry is checked before any item is read (``_check_items``), because a compact item carries no
hash and a flipped bit in one can point it at another valid DATA object: its items must be sorted,
it must end where the next object begins and, in a file closed cleanly, its sequence number must
lie inside the header's range. Its items are bounded (``MAX_ITEMS``) and its realtime stamp must be
one systemd could have written (``REALTIME_MAX``).
"""

from __future__ import annotations

import operator
from collections.abc import Collection, Iterator, Sequence

from imagelint.facts.journal.errors import CorruptJournal
from imagelint.facts.journal.format import (
    ENTRY_ITEMS_OFFSET,
    ENTRY_OBJECT,
    OBJECT_HEADER,
    OBJECT_HEADER_SIZE,
    ObjectType,
)
from imagelint.facts.journal.objects import IDS_KEPT, Value
from imagelint.facts.journal.paged import PagedBuffer, regular_items, unpack_u32
from imagelint.facts.journal.selection import FieldSelection

TYPE_CHECKING = False
if TYPE_CHECKING:  # ``typing`` costs milliseconds to import and is needed for annotations only
    from typing import Any

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

MAX_ITEMS = 65_536
"""Items (fields) one entry may have; journald writes at most 1024 user fields plus its own."""
REALTIME_MAX = 1 << 55
"""An entry's realtime stamp must lie in (0, REALTIME_MAX) µs (about the year 3111), as systemd's
VALID_REALTIME demands of every entry it writes; any other stamp is damage (and no date to show)."""
_ENTRY_READ = 512  # bytes read at an entry: its header, ~100 compact or ~28 regular items, the next header
_ENTRY = int(ObjectType.ENTRY)
_LAST_TYPE = max(ObjectType)
_HEX = frozenset("0123456789abcdef")


def _with_repeats(pairs: list[tuple[str, Value]]) -> Entry:
    """``pairs`` as an entry whose repeated fields are lists of their values, in item order."""
    out: Entry = {}
    for name, value in pairs:
        prev = out.get(name)
        if prev is None:
            out[name] = value
        elif type(prev) is list:
            prev.append(value)
        else:
            out[name] = [prev, value]
    return out


class EntryDecoder(FieldSelection):
    """The entries of one journal file, decoded."""

    def __init__(self, buf: PagedBuffer, name: str, file_size: int) -> None:
        super().__init__(buf, name, file_size)
        h = self.header
        self._seqnum_id_hex = h.seqnum_id.hex()
        self._boot_hex: dict[bytes, str] = {}
        self._boot_data: dict[int, bytes] | None = None  # see ``_boot_objects``
        # in a file closed cleanly, its head and tail sequence numbers bound its entries' (writers
        # number entries in order)
        closed = self._lists_complete and h.n_entries
        self._seqnum_lo = h.head_entry_seqnum if closed else 1
        self._seqnum_hi = h.tail_entry_seqnum if closed else 1 << 64

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
        _sid, _s, boot_id, _m, realtime, _x = self.entry_key(off)
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
            items: Sequence[int] = unpack_u32(source, at, n)
        else:
            items = regular_items(source, at, n)
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
        list, read once per file (one object per boot; at most ``IDS_KEPT``) in a file closed cleanly
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
        for off in self._field_data("_BOOT_ID"):
            if len(found) >= IDS_KEPT:
                break
            name, value = self._cache[off]
            if name != "_BOOT_ID":
                raise CorruptJournal("the data list of field _BOOT_ID holds another field", offset=off)
            if isinstance(value, str) and len(value) == 32 and _HEX.issuperset(value):
                found[off] = bytes.fromhex(value)

    def _boot(self, boot_id: bytes) -> str:
        memo = self._boot_hex
        boot_hex = memo.get(boot_id)
        if boot_hex is None:
            if len(memo) >= IDS_KEPT:
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
            out = _with_repeats(pairs)
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
            out = _with_repeats(pairs)
        boot_hex = self._boot_hex.get(boot_id) or self._boot(boot_id)
        return boot_hex, realtime, out

    def entries(self, fields: Collection[str] | None = None) -> Iterator[Entry]:
        """Every entry of this file alone, in file order."""
        entry = self.entry
        for items in self._array_chain(self.header.entry_array_offset, None):
            for off in items:
                yield entry(off, fields)
