"""Hash chains: finding a DATA or FIELD object through the file's hash tables, a field's data list,
and the indexed match (journalctl's ``FIELD=value`` matches) built on them.

A hash table's bucket heads a chain of objects whose hash falls in that bucket. Every object met
on a chain must belong to that chain's bucket (a damaged stored hash could otherwise hide the very
object sought: ``HashMismatch``), chains must move strictly forward through the file and are cut at
``MAX_CHAIN`` steps, so a loop is damage instead of a spin. A DATA object found is read with its
payload checked against its hash (see ``objects``), so a damaged one is never skipped as another
value. A FIELD object's data list links the DATA objects of that field, newest (highest offset)
first.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence

from imagelint.facts.journal.arrays import EntryArrays
from imagelint.facts.journal.errors import CorruptJournal, HashMismatch
from imagelint.facts.journal.format import FIELD_OBJECT, FIELD_PAYLOAD_OFFSET, HASH_ITEM, ObjectType
from imagelint.facts.journal.objects import Value, decode

MAX_CHAIN = 1_000_000  # hash-chain steps before we call it a loop


class HashChains(EntryArrays):
    """Indexed lookups in one journal file."""

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
            if stored == h64 and self._checked_payload(off) == payload:
                return off
            steps += 1
            if (nxt and nxt <= off) or steps > MAX_CHAIN:
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
            if (nxt and nxt <= off) or steps > MAX_CHAIN:
                raise CorruptJournal("field hash chain loops", offset=off)
            off = nxt
        return None

    def _field_head(self, name: str) -> int:
        """The first DATA object on the data list of field ``name`` (0: no entry has the field)."""
        field_off = self.find_field(name)
        if field_off is None:
            return 0
        head: int = FIELD_OBJECT.unpack(self._buf[field_off : field_off + FIELD_OBJECT.size])[5]
        return head

    def _field_data(self, name: str) -> Iterator[int]:
        """The DATA objects on the data list of field ``name`` (none when no entry has it), newest
        first: writers put each new object at the head of its field's list, so offsets fall, and
        a list that does not is damage (a loop)."""
        off = self._field_head(name)
        while off:
            yield off
            nxt = self._next_field(off)
            if nxt >= off:
                raise CorruptJournal("field's data chain loops", offset=off)
            off = nxt

    def field_values(self, name: str) -> Iterator[Value]:
        """Every distinct value of field ``name`` in this file (via the FIELD object's DATA list)."""
        for off in self._field_data(name):
            yield decode(self._checked_payload(off)[len(name) + 1 :])

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
                for off in self._field_data(name):
                    left.difference_update(self._data_entry_offsets(off))
            return sorted(left)
        return sorted(result) if isinstance(result, set) else result
