"""The journal page cache (``paged.PagedBuffer``): small pages for jumps, read-ahead in file order,
the same bytes either way, the byte budget kept, and a shrunk file answered as without read-ahead."""

from __future__ import annotations

import random

import pytest

from imagelint.facts.journal import paged
from imagelint.facts.journal.errors import FileShrank
from imagelint.facts.journal.paged import AHEAD, MAX_CACHED, PAGE, PAGE_SHIFT, PagedBuffer


class Recorded:
    """A ``RandomAccessFile`` over bytes that logs its reads; ``cut`` makes it shorter than it says."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)
        self.reads: list[tuple[int, int]] = []
        self.cut: int | None = None

    def pread(self, offset: int, length: int) -> bytes:
        self.reads.append((offset, length))
        end = len(self.data) if self.cut is None else self.cut
        return self.data[offset : min(offset + length, end)]

    def fileno(self) -> None:
        return None

    def close(self) -> None:
        pass


@pytest.fixture
def data() -> bytes:
    return random.Random(3).randbytes(64 * PAGE + 123)


def test_reading_in_order_reads_ahead(data: bytes) -> None:
    f = Recorded(data)
    buf = PagedBuffer(f, f.size)
    got = b"".join(buf[i : min(i + 100, f.size)] for i in range(0, f.size, 100))
    assert got == data
    # the first page alone, then runs of AHEAD pages
    assert f.reads[0] == (0, PAGE)
    assert all(length == AHEAD * PAGE for _o, length in f.reads[1:-1])
    assert len(f.reads) <= 2 + f.size // (AHEAD * PAGE)
    buf.close()


def test_slices_across_pages_are_the_files_bytes(data: bytes) -> None:
    """Slices that begin and end anywhere, over one page to just under a direct read's length."""
    rng = random.Random(5)
    buf = PagedBuffer(Recorded(data), len(data))
    for _ in range(500):
        start = rng.randrange(len(data))
        stop = min(len(data), start + rng.randrange(1, paged._DIRECT))
        assert buf[start:stop] == data[start:stop], (start, stop)
    buf.close()


@pytest.mark.parametrize(
    "key", [slice(None, 10), slice(-10, None), slice(-5, 1 << 40), slice(PAGE - 3, PAGE + 3)]
)
def test_open_negative_and_overlong_slices_are_the_files_bytes(data: bytes, key: slice) -> None:
    """Slices as bytes takes them, within one page or across two (the copy across pages once
    doubled a page for a slice that was open or past the end but within one page)."""
    buf = PagedBuffer(Recorded(data), len(data))
    assert buf[key] == data[key]
    buf.close()


def test_jumps_read_one_small_page_each(data: bytes) -> None:
    f = Recorded(data)
    buf = PagedBuffer(f, f.size)
    spots = [40 * PAGE + 7, 3 * PAGE + 100, 20 * PAGE, 50 * PAGE + 9, 11 * PAGE + 1]
    for at in spots:
        assert buf[at : at + 64] == data[at : at + 64]
    assert f.reads == [((at >> PAGE_SHIFT) << PAGE_SHIFT, PAGE) for at in spots]
    for at in spots:  # cached: no read again
        assert buf[at : at + 64] == data[at : at + 64]
    assert len(f.reads) == len(spots)
    buf.close()


def test_the_byte_budget_holds_with_read_ahead(data: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paged, "MAX_CACHED", 4 * PAGE)
    monkeypatch.setattr(PagedBuffer, "_open", set())  # the budget is the process's: start from none
    monkeypatch.setattr(PagedBuffer, "_cached", 0)
    f = Recorded(data)
    buf = PagedBuffer(f, f.size)
    for i in range(0, f.size, 500):
        assert buf[i : i + 10] == data[i : i + 10]
        assert len(buf._pages) <= 4 and PagedBuffer._cached <= 4
    buf.close()
    assert MAX_CACHED >= PAGE  # the real budget holds pages


def test_a_shrunk_file_answers_the_page_asked_for(data: bytes) -> None:
    f = Recorded(data)
    buf = PagedBuffer(f, f.size)
    assert buf[0:10] == data[0:10]  # page 0 read: a miss on page 1 now reads ahead
    f.cut = 2 * PAGE  # the file shrinks to two pages
    assert buf[PAGE : PAGE + 10] == data[PAGE : PAGE + 10]  # the read-ahead came back short: page 1 alone
    assert f.reads[-1] == (PAGE, PAGE)
    with pytest.raises(FileShrank):
        buf[2 * PAGE : 2 * PAGE + 10]
    buf.close()


def test_eviction_takes_from_the_buffer_holding_the_most(
    data: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several pages leave at once, from the largest holder, and a buffer emptied holds no share."""
    monkeypatch.setattr(paged, "MAX_CACHED", AHEAD * PAGE)
    monkeypatch.setattr(PagedBuffer, "_open", set())
    monkeypatch.setattr(PagedBuffer, "_cached", 0)
    a, b = Recorded(data), Recorded(data)
    first, second = PagedBuffer(a, a.size), PagedBuffer(b, b.size)
    for i in range(0, 2 * PAGE, 100):  # page 0, then a read-ahead of AHEAD pages: the budget
        assert first[i : i + 10] == data[i : i + 10]
    assert len(first._pages) == AHEAD and PagedBuffer._cached == AHEAD
    for i in range(0, 2 * PAGE, 100):  # the second buffer takes the whole budget from the first
        assert second[i : i + 10] == data[i : i + 10]
    assert len(second._pages) == AHEAD and PagedBuffer._cached == AHEAD
    assert not first._pages and PagedBuffer._open == {second}
    assert first[PAGE + 5 : PAGE + 9] == data[PAGE + 5 : PAGE + 9]  # read again when asked
    assert PagedBuffer._cached == AHEAD
    first.close()
    second.close()
    assert PagedBuffer._cached == 0
