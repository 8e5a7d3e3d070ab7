"""One journal file, read by positioned reads and defensively: ``JournalFile``, the reader's façade.

``JournalFile`` walks the structures described in ``format``: the global entry-array chain for a
full listing, the DATA hash table plus a DATA object's own entry-array chain for indexed
``FIELD=value`` lookups, and ENTRY objects whose items point at (possibly compressed) DATA objects.
Any inconsistency raises ``CorruptJournal``; callers (``Journal``) record it against the file and
carry on with the rest. Its parts, one job each, are the classes it is made of:

* ``objects.ObjectReader``: bounds, object headers and DATA payloads, each read bounded and checked
  against its stored hash (``HASH_BUDGET``, ``MAX_VALUE``, ``ENTRY_BUDGET``);
* ``arrays.EntryArrays``: entry-array chains (``entry_offsets``, ``follow_offsets``);
* ``chains.HashChains``: hash-table lookups and FIELD data lists (``find_data``, ``find_field``,
  ``field_values``, ``match_offsets``);
* ``selection.FieldSelection``: decoding some fields only, without reading the other items;
* ``entries.EntryDecoder``: entries to dicts (``entry``, ``fields_at``, ``entries``, ``entry_key``);
* ``structure.StructureCheck``: ``check_structure``, run before a file's first read.

The file is never mapped: every byte comes from ``pread`` through a ``PagedBuffer`` (``paged``, a
bounded cache of pages), whether the file is on this host, in a directory image or in a disk image.
A journal can be truncated while it is read (journald's vacuuming, a hostile image, a test), and a
mapping of it then kills the process with SIGBUS at the first touch past the new end, which no
Python code can catch; a short read instead raises ``FileShrank``, a ``CorruptJournal`` like any
other damage. The cache also bounds what a full scan keeps resident, where a mapping would count
every page touched.
"""

from __future__ import annotations

import os

from imagelint.facts.journal.entries import META_FIELDS, Entry, EntryDecoder, EntryKey, FieldValue
from imagelint.facts.journal.errors import CorruptJournal
from imagelint.facts.journal.objects import Value
from imagelint.facts.journal.paged import PagedBuffer
from imagelint.facts.journal.structure import StructureCheck

TYPE_CHECKING = False
if TYPE_CHECKING:
    from imagelint.targets.interface import RandomAccessFile

__all__ = ["META_FIELDS", "Entry", "EntryKey", "FieldValue", "JournalFile", "Value"]


class JournalFile(StructureCheck, EntryDecoder):
    """A read-only view of one journal file.

    Open with ``JournalFile.open(path)`` or ``JournalFile.from_random(f, name)``; both validate the
    header (raising ``UnsupportedJournal`` or ``CorruptJournal``) before returning.
    """

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
        self._buf.close()

    def shrank(self) -> bool:
        """Whether the file is shorter now than when it was opened (truncated under the reader)."""
        return not self._buf.whole()

    def __repr__(self) -> str:
        return f"JournalFile({self.name!r})"
