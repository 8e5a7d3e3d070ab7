"""A journal file read by positioned reads through a bounded page cache: never a mapping.

Every journal file is read this way, wherever it comes from: a disk image or a snapshot gives a
stream (``pread(offset, length)``) and no descriptor at all, and a file on this host or in a
directory image may be truncated while it is read, which a mapping answers with SIGBUS (see
``reader``). :class:`PagedBuffer` offers the one operation the reader uses, slicing, with at most
``MAX_CACHED`` bytes of pages kept (least recently used first out) so a full scan of any journal
stays within a fixed memory budget. A slice larger than a few pages is read directly and not
cached (the reader caps single values itself).

Pages are small (8 KiB) because indexed reads jump: an analysis that follows a DATA object's entry
list touches one entry here, one DATA object there, a few hundred bytes each, and a large page would
copy (and keep) mostly bytes nobody asked for, so the budget would hold few of the places revisited.
Reading in order is recognised instead: a miss on the page right after the previous miss reads
``AHEAD`` pages at once (a full scan issues as few reads as with large pages). A read-ahead that
comes back short falls back to the one page asked for, so a file that shrank answers exactly as it
would have without read-ahead.

The size is fixed when the file is opened (a journal grows by appending; what a writer appends later
is read by opening it again, see :mod:`imagelint.probes.journal`). A read that comes back short
inside that size means the file shrank under the reader: it raises ``FileShrank`` rather than hand
over fewer bytes.

Runs of integers (entry-array items, an entry's items) are read with ``unpack_u32``,
``unpack_u64`` and ``regular_items``: one slice of exactly the bytes they take, unpacked by a
``struct`` layout made once per count (a hostile count costs one layout, not a cache of them).
"""

from __future__ import annotations

import struct
from collections import OrderedDict

from imagelint.facts.journal.errors import CorruptJournal, FileShrank

TYPE_CHECKING = False
if TYPE_CHECKING:  # ``typing`` (which the interface module needs) stays off the journal's import path
    from imagelint.targets.interface import RandomAccessFile

PAGE_SHIFT = 13
PAGE = 1 << PAGE_SHIFT
AHEAD = 8
"""Pages read at once when the page missed follows the previous miss (a read in file order)."""
MAX_CACHED = 32 * 1024 * 1024
"""Bytes of pages kept by all the open buffers of this process together (a run may open hundreds of
journal files): a buffer that needs a page when the budget is spent evicts from the buffer holding
the most, itself included, least recently used first."""
_DIRECT = 32 * PAGE  # slices at least this long bypass the cache
_STRUCTS_KEPT = 256  # struct layouts by item count, made when first needed: up to this count they are kept
_U32: dict[int, struct.Struct] = {}
_U64: dict[int, struct.Struct] = {}
_ITEMS_REGULAR: dict[int, struct.Struct] = {}  # regular entry items: the object offsets, hashes skipped


class PagedBuffer:
    """Read-only, bytes-like view of a :class:`RandomAccessFile` of ``size`` bytes."""

    _open: set[PagedBuffer] = set()  # buffers holding pages, which share ``MAX_CACHED``
    _cached = 0  # pages they hold

    def __init__(self, f: RandomAccessFile, size: int) -> None:
        self._f = f
        self._size = size
        self._pages: OrderedDict[int, bytes] = OrderedDict()
        # the page the last slice came from: most slices fall in the page before them
        self._last_index = -1
        self._last_page = b""
        self._next_miss = -1  # the page after the last one read: a miss there is a read in order
        self.closed = False
        self.reads = 0  # positioned reads issued (what the cache saved shows against the slices taken)

    def __len__(self) -> int:
        return self._size

    def _page(self, index: int) -> bytes:
        pages = self._pages
        page = pages.get(index)
        if page is not None:
            pages.move_to_end(index)
        else:
            count = AHEAD if index == self._next_miss else 1
            start = index << PAGE_SHIFT
            count = max(1, min(count, ((self._size - start) + PAGE - 1) >> PAGE_SHIFT))
            try:
                run = self._read(start, count << PAGE_SHIFT)
            except FileShrank:
                if count == 1:
                    raise
                count = 1
                run = self._read(start, PAGE)
            page = run[:PAGE] if count > 1 else run
            keep = [(index, page)]
            budget = MAX_CACHED >> PAGE_SHIFT  # the asked page is kept even past a budget under a page
            for i in range(1, min(count, budget)):
                ahead = run[i << PAGE_SHIFT : (i + 1) << PAGE_SHIFT]
                if ahead and index + i not in pages:
                    keep.append((index + i, ahead))
            self._make_room(len(keep), budget)
            pages.update(keep)
            PagedBuffer._cached += len(keep)
            PagedBuffer._open.add(self)
            self._next_miss = index + count
        self._last_index = index
        self._last_page = page
        return page

    def _make_room(self, n: int, budget: int) -> None:
        """Evict pages until ``n`` more fit in ``budget``: from the buffer holding the most (this one
        included), least recently used first, several at a time (one search per buffer emptied or
        room made, not one per page)."""
        cls = PagedBuffer
        while cls._cached + n > budget:
            victim = max(cls._open, key=lambda b: len(b._pages), default=self)
            held = victim._pages
            if not held:
                return
            for _ in range(min(len(held), cls._cached + n - budget)):
                held.popitem(last=False)
                cls._cached -= 1
            victim._last_index = -1
            if not held:
                cls._open.discard(victim)

    def _read(self, offset: int, length: int) -> bytes:
        length = max(0, min(length, self._size - offset))
        chunks: list[bytes] = []
        while length > 0:
            try:
                chunk = self._f.pread(offset, length)
            except OSError as exc:  # an I/O error under the file: unreadable there, as damage is
                raise CorruptJournal(f"cannot read at offset {offset}: {exc.strerror or exc}") from None
            self.reads += 1
            if not chunk:
                raise FileShrank(
                    f"the file shrank while being read: it was {self._size} bytes and ends before {offset}"
                )
            chunks.append(chunk)
            offset += len(chunk)
            length -= len(chunk)
        return b"".join(chunks)

    def __getitem__(self, key: slice) -> bytes:
        start, stop = key.start, key.stop
        if not (
            type(start) is int and type(stop) is int and 0 <= start < stop <= self._size and key.step is None
        ):
            if not isinstance(key, slice) or key.step not in (None, 1):
                raise TypeError("PagedBuffer supports contiguous slices only")
            start, stop, _ = key.indices(self._size)  # open, negative or past the end: as bytes does
            if stop <= start:
                return b""
        first, last = start >> PAGE_SHIFT, (stop - 1) >> PAGE_SHIFT
        if first == last:  # the common case: within one page
            page = self._last_page if first == self._last_index else self._page(first)
            base = first << PAGE_SHIFT
            return page[start - base : stop - base]
        if stop - start >= _DIRECT:
            return self._read(start, stop - start)
        head = self._page(first)[start - (first << PAGE_SHIFT) :]  # only the parts asked for are copied
        middle = [self._page(i) for i in range(first + 1, last)]
        tail = self._page(last)[: stop - (last << PAGE_SHIFT)]
        return b"".join([head, *middle, tail])

    def whole(self) -> bool:
        """Whether the file still reaches the size it had when opened (one positioned read)."""
        try:
            return self._size == 0 or bool(self._f.pread(self._size - 1, 1))
        except OSError:
            return False

    def close(self) -> None:
        PagedBuffer._cached -= len(self._pages)
        PagedBuffer._open.discard(self)
        self._pages.clear()
        self._last_page = b""
        self._last_index = -1
        if not self.closed:
            self.closed = True
            self._f.close()


Buffer = bytes | PagedBuffer
"""What integer runs are read from: a file's pages, or bytes already read from them."""


def _layout(table: dict[int, struct.Struct], n: int, fmt: str) -> struct.Struct:
    s = table.get(n)
    if s is None:
        s = struct.Struct("<" + fmt * n if len(fmt) > 1 else f"<{n}{fmt}")
        if n <= _STRUCTS_KEPT:
            table[n] = s
    return s


def unpack_u32(buf: Buffer, off: int, n: int) -> tuple[int, ...]:
    """``n`` little-endian 32-bit integers at ``off``."""
    s = _U32.get(n) or _layout(_U32, n, "I")
    return s.unpack(buf[off : off + s.size])


def unpack_u64(buf: Buffer, off: int, n: int) -> tuple[int, ...]:
    """``n`` little-endian 64-bit integers at ``off``."""
    s = _U64.get(n) or _layout(_U64, n, "Q")
    return s.unpack(buf[off : off + s.size])


def regular_items(buf: Buffer, off: int, n: int) -> tuple[int, ...]:
    """The object offsets of ``n`` regular (16-byte: offset, hash) entry items at ``off``."""
    s = _ITEMS_REGULAR.get(n) or _layout(_ITEMS_REGULAR, n, "Q8x")
    return s.unpack(buf[off : off + s.size])
