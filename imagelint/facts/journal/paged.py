"""A journal file read by positioned reads through a bounded page cache, for targets with no real file.

A disk image or a snapshot gives a journal as a stream (``pread(offset, length)``), not a descriptor
to ``mmap``. :class:`PagedBuffer` offers the two operations the reader uses on a mapping, slicing and
``find``, with at most ``MAX_CACHED`` bytes of pages kept (least recently used first out) so a full
scan of any journal stays within a fixed memory budget. A slice larger than a few pages is read
directly and not cached (the reader caps single values itself).
"""

from __future__ import annotations

from collections import OrderedDict

TYPE_CHECKING = False
if TYPE_CHECKING:  # ``typing`` (which the interface module needs) stays off the journal's import path
    from imagelint.targets.interface import RandomAccessFile

PAGE = 64 * 1024
MAX_CACHED = 32 * 1024 * 1024  # bytes of pages kept
_DIRECT = 4 * PAGE  # slices at least this long bypass the cache


class PagedBuffer:
    """Read-only, bytes-like view of a :class:`RandomAccessFile` of ``size`` bytes."""

    def __init__(self, f: RandomAccessFile, size: int, *, max_cached: int = MAX_CACHED) -> None:
        self._f = f
        self._size = size
        self._pages: OrderedDict[int, bytes] = OrderedDict()
        self._max_pages = max(1, max_cached // PAGE)
        self.closed = False
        self.reads = 0  # positioned reads issued (what the cache saved shows against the slices taken)

    def __len__(self) -> int:
        return self._size

    def _page(self, index: int) -> bytes:
        pages = self._pages
        page = pages.get(index)
        if page is not None:
            pages.move_to_end(index)
            return page
        page = self._read(index * PAGE, PAGE)
        pages[index] = page
        if len(pages) > self._max_pages:
            pages.popitem(last=False)
        return page

    def _read(self, offset: int, length: int) -> bytes:
        length = max(0, min(length, self._size - offset))
        chunks: list[bytes] = []
        while length > 0:
            chunk = self._f.pread(offset, length)
            self.reads += 1
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
            length -= len(chunk)
        return b"".join(chunks)

    def __getitem__(self, key: slice) -> bytes:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("PagedBuffer supports contiguous slices only")
        start, stop, _ = key.indices(self._size)
        if stop <= start:
            return b""
        if stop - start >= _DIRECT:
            return self._read(start, stop - start)
        first, last = start // PAGE, (stop - 1) // PAGE
        if first == last:
            base = first * PAGE
            return self._page(first)[start - base : stop - base]
        joined = b"".join(self._page(i) for i in range(first, last + 1))
        base = first * PAGE
        return joined[start - base : stop - base]

    def find(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        end = self._size if end is None else min(end, self._size)
        at = self[start:end].find(sub)
        return -1 if at < 0 else start + at

    def close(self) -> None:
        self._pages.clear()
        if not self.closed:
            self.closed = True
            self._f.close()
