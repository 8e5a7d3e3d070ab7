"""Entry-array chains: which entries a journal file, or one DATA object, links, in file order.

An entry array holds entry offsets and links the next array; the header's chain lists every entry,
and each DATA object lists its entries as its first entry plus a chain of its own. Chains must move
strictly forward through the file (writers only append), and so must the entry offsets across the
whole chain, so a loop or a back-pointer is detected as corruption (``CorruptJournal``) instead of
spinning. Arrays are unpacked a chunk at a time (``_ARRAY_CHUNK`` items): a hostile array can claim
the whole file. The first zero item is the unused tail of the last array: the chain ends there.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator

from imagelint.facts.journal.errors import CorruptJournal
from imagelint.facts.journal.format import ENTRY_ARRAY_ITEMS_OFFSET, ENTRY_ARRAY_OBJECT, ObjectType
from imagelint.facts.journal.objects import ObjectReader
from imagelint.facts.journal.paged import unpack_u32, unpack_u64

_ARRAY_CHUNK = 65_536  # entry-array items unpacked at a time (a hostile array can claim the whole file)


class EntryArrays(ObjectReader):
    """The entry-array chains of one journal file."""

    def _array_chain(self, first: int, limit: int | None) -> Iterator[tuple[int, ...]]:
        """Yield the items of the entry arrays chained from ``first`` (in tuples of at most
        ``_ARRAY_CHUNK``), stopping at the first zero item (the unused tail of the last array).

        ``limit`` caps the total number of items (a DATA object says how many it has). Entry offsets
        must increase strictly across the whole chain, and each array must lie after the previous.
        """
        buf = self._buf
        compact = self.compact
        width = 4 if compact else 8
        unpack = unpack_u32 if compact else unpack_u64
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
        unpack = unpack_u32 if self.compact else unpack_u64
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
