"""The structure check: what a torn or damaged journal file breaks, found before its first read.

``check_structure`` is the cheap integrity check ``Journal`` runs before a file's first read (see
there): header, tail object, the global entry-array chain and the first and last entries' headers,
so that a torn file is not taken as complete when only its index is read. It reads no DATA object;
its cost grows with the number of entry arrays (a few dozen), not with the entries.
"""

from __future__ import annotations

import itertools
import struct

from imagelint.facts.journal.entries import MAX_ITEMS, REALTIME_MAX
from imagelint.facts.journal.errors import CorruptJournal
from imagelint.facts.journal.format import (
    DATA_PAYLOAD_OFFSET_REGULAR,
    ENTRY_ARRAY_ITEMS_OFFSET,
    ENTRY_ARRAY_OBJECT,
    ENTRY_ITEMS_OFFSET,
    ENTRY_OBJECT,
    FIELD_PAYLOAD_OFFSET,
    OBJECT_HEADER,
    OBJECT_HEADER_SIZE,
    ObjectType,
    State,
)
from imagelint.facts.journal.objects import U64_AT, ObjectReader
from imagelint.facts.journal.paged import PagedBuffer, unpack_u32, unpack_u64

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
_U32_AT = struct.Struct("<I")
_ENTRY = int(ObjectType.ENTRY)


class StructureCheck(ObjectReader):
    """The structure check of one journal file, run once (its outcome kept)."""

    def __init__(self, buf: PagedBuffer, name: str, file_size: int) -> None:
        super().__init__(buf, name, file_size)
        self._checked: str | None = None  # the outcome of ``check_structure``, once run

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
        item = _U32_AT if self.compact else U64_AT
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
            unpack = unpack_u32 if self.compact else unpack_u64
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
