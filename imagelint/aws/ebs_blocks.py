"""An EBS snapshot as a raw, read-only, seekable disk: the stream the disk targets read.

:class:`SnapshotStream` turns reads at any offset into 512 KiB ``GetSnapshotBlock`` calls
(:mod:`imagelint.aws.ebs_api`), and only for the blocks a read touches: the filesystem reader above
it decides what is read, so an audit fetches a small share of the snapshot. A block the listing does
not name was never written and reads as zeros, without a request.

- **Cache**: an LRU of fetched blocks bounded in bytes (``cache_bytes``, default 64 MiB); read-ahead
  blocks in flight count against the same bound, and at most ``concurrency`` prefetched blocks are
  in flight at a time, so memory stays under ``cache_bytes`` plus those and one read.
- **Parallel**: a thread pool of ``concurrency`` workers (default 16). A read that spans several
  blocks asks for all of them at once; sequential reads (a read starting where the last one ended)
  grow a read-ahead window of following *allocated* blocks, doubling up to ``readahead`` blocks
  (default 16), the way the kernel's read-ahead does. Random reads get no read-ahead.
- **Prefetch** (:meth:`prefetch`): the filesystem reader above names byte ranges it will read soon
  (the disk target's hints: ext4 inode tables, the directories a tree walk descends into next); their
  blocks are requested at once on the pool, without waiting, so reads issued one at a time by a
  single-threaded parser find them fetched in parallel. :meth:`fetched` tells the reader whether
  ranges are in already (the disk target then lists directories ahead of its walk).
- **Counters** (:meth:`stats`): blocks listed (allocated), blocks and bytes fetched, cache hits,
  zero-block reads, read-ahead and prefetch, requests, retries and throttling; the disk target puts
  them in the report.

- **Source**: the blocks come from a :class:`BlockSource`: the snapshot's own
  :class:`~imagelint.aws.ebs_api.EbsApi`, or a source that serves some blocks from elsewhere
  (:mod:`imagelint.aws.ebs_reuse`: a diff's NEW snapshot, its changed blocks from the API and the
  rest from OLD's blocks). The stream neither knows nor cares; the listing it reads sizes and zeros
  from is always the snapshot's own.

The first failure of a fetch (denied, not found, checksum, retries exhausted) is kept: a filesystem
reader may turn an I/O error into "file unreadable", so :meth:`raise_if_failed` lets the caller end
the run with the real cause. Nothing here writes: the stream is not writable.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from imagelint.aws.call_window import CallWindow
from imagelint.aws.ebs_api import BLOCK_SIZE, ApiCounters, BlockMap
from imagelint.errors import ImageLintError

DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
DEFAULT_CONCURRENCY = 16
DEFAULT_READAHEAD = 16
ZERO_BLOCK = bytes(BLOCK_SIZE)


class BlockSource(Protocol):
    """Where a stream's blocks come from (:class:`imagelint.aws.ebs_api.EbsApi` is one)."""

    @property
    def snapshot_id(self) -> str: ...

    @property
    def counters(self) -> ApiCounters: ...

    @property
    def window(self) -> CallWindow:
        """The calls the source may have in flight (lowered while AWS throttles)."""
        ...

    def blocks(self) -> BlockMap:
        """The snapshot's listing: its size and its allocated blocks."""
        ...

    def fetch(self, index: int) -> bytes:
        """The verified data of one allocated block."""
        ...


class SnapshotStream(io.RawIOBase):
    """Read-only, seekable bytes of one snapshot (``size`` = the volume size)."""

    def __init__(
        self,
        api: BlockSource,
        *,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        concurrency: int = DEFAULT_CONCURRENCY,
        readahead: int = DEFAULT_READAHEAD,
        on_fetch: Callable[[dict[str, int]], None] | None = None,
    ) -> None:
        super().__init__()
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.api = api
        self.snapshot_id = api.snapshot_id
        listing = api.blocks()
        self.size = listing.volume_bytes
        self.allocated = sorted(listing.tokens)
        self._allocated = set(self.allocated)
        self.cache_blocks = max(1, cache_bytes // BLOCK_SIZE)
        self.concurrency = concurrency
        self.readahead = max(0, min(readahead, self.cache_blocks // 2))
        self.prefetch_limit = self.cache_blocks * 3 // 4  # prefetched, unread blocks held at a time
        self.on_fetch = on_fetch
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="ebs-block")
        self._lock = threading.Lock()
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self._inflight: dict[int, Future[bytes]] = {}
        self._pinned: set[int] = set()  # prefetched, not read yet: in flight or cached, never evicted
        self._failed: dict[int, BaseException] = {}  # prefetched blocks whose fetch failed, not read yet
        self._queued: OrderedDict[int, None] = OrderedDict()  # prefetched, waiting for a free worker
        self._prefetching: set[int] = set()  # prefetch fetches given to the pool, not done
        self._closing = False
        self._pos = 0
        self._last_end = -1
        self._streak = 0
        self._failure: ImageLintError | None = None
        self._counts = {
            "blocks_fetched": 0,
            "bytes_fetched": 0,
            "cache_hits": 0,
            "zero_block_reads": 0,
            "readahead_blocks": 0,
            "prefetch_blocks": 0,
            "prefetch_dropped": 0,
            "bytes_read": 0,
        }

    # --- io.RawIOBase -----------------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def write(self, data: Any) -> int:
        raise io.UnsupportedOperation(f"{self.snapshot_id}: the snapshot is read-only")

    def truncate(self, size: int | None = None) -> int:
        raise io.UnsupportedOperation(f"{self.snapshot_id}: the snapshot is read-only")

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise OSError(f"{self.snapshot_id}: seek to a negative offset")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        start = self._pos
        end = min(self.size, start + len(view))
        if end <= start:
            return 0
        first, last = start // BLOCK_SIZE, (end - 1) // BLOCK_SIZE
        sequential = start == self._last_end
        wanted = list(range(first, last + 1))
        futures = {i: self._request(i) for i in wanted if i in self._allocated}
        self._read_ahead(last, sequential, new_block=last > (self._last_end - 1) // BLOCK_SIZE)
        written = 0
        for index in wanted:
            block = self._block(index, futures.get(index))
            lo = max(start, index * BLOCK_SIZE) - index * BLOCK_SIZE
            hi = min(end, (index + 1) * BLOCK_SIZE) - index * BLOCK_SIZE
            view[written : written + hi - lo] = block[lo:hi]
            written += hi - lo
        self._pos = self._last_end = end
        with self._lock:
            self._counts["bytes_read"] += written
        return written

    def close(self) -> None:
        if not self.closed:
            with self._lock:
                self._closing = True
                self._queued.clear()
            self._pool.shutdown(wait=True, cancel_futures=True)
            with self._lock:
                self._cache.clear()
                self._pinned.clear()
                self._failed.clear()
        super().close()

    # --- prefetch ---------------------------------------------------------------------------------

    def prefetch(self, ranges: Iterable[tuple[int, int]]) -> int:
        """Start fetching the blocks of byte ranges ``(offset, length)`` the reader will read soon;
        returns at once, with the number of blocks requested.

        Each allocated block the ranges touch is requested once, in the order given: blocks already
        cached or in flight, blocks named twice and blocks the snapshot never stored (zeros) are
        skipped. At most ``concurrency`` prefetched blocks are in the pool at a time, the rest wait
        in order for a free worker, so a read's own fetch waits behind a few prefetches at most (and
        a read of a block still waiting fetches it at once). A prefetched block is kept in the cache
        until it is read once (eviction passes it over), and at most :attr:`prefetch_limit` (three
        quarters of the cache) are held so at a time: a prefetch never evicts what an earlier one
        fetched for the reader, the rest of the cache stays for reads, and what does not fit is
        dropped (counted; those blocks are read when asked for, as without a prefetch).

        A failed fetch is what a read's failed fetch is: the first failure is kept (:attr:`failure`,
        :meth:`raise_if_failed`), and the read that needs the block raises the same ``OSError`` a
        read's own fetch would have raised, without asking again.
        """
        wanted = self._indexes(ranges)
        requested = 0
        with self._lock:
            if self.closed:
                return 0
            for index in wanted:
                if (
                    index in self._cache
                    or index in self._inflight
                    or index in self._pinned
                    or index in self._failed
                ):
                    continue
                if len(self._pinned) >= self.prefetch_limit:
                    self._counts["prefetch_dropped"] += 1
                    continue
                self._pinned.add(index)
                self._queued[index] = None
                requested += 1
            self._counts["prefetch_blocks"] += requested
            self._pump()
        return requested

    def _pump(self) -> None:
        """Give waiting prefetches to the pool while fewer than ``concurrency`` are in it (lock held)."""
        while self._queued and len(self._prefetching) < self.concurrency and not self._closing:
            index, _ = self._queued.popitem(last=False)
            self._prefetching.add(index)
            self._inflight[index] = self._pool.submit(self._fetch, index)

    def fetched(self, ranges: Iterable[tuple[int, int]]) -> bool:
        """Whether reading the byte ranges now would wait for nothing: every allocated block they
        touch is cached (a block never written reads as zeros and needs no fetch)."""
        indexes = set(self._indexes(ranges))
        with self._lock:
            return all(index in self._cache for index in indexes)

    def _indexes(self, ranges: Iterable[tuple[int, int]]) -> list[int]:
        """The allocated blocks byte ranges touch, in order, once each."""
        wanted: dict[int, None] = {}
        for offset, length in ranges:
            if length <= 0 or offset >= self.size:
                continue
            first = max(0, offset) // BLOCK_SIZE
            last = (min(self.size, offset + length) - 1) // BLOCK_SIZE
            for index in range(first, last + 1):
                if index in self._allocated:
                    wanted.setdefault(index)
        return list(wanted)

    # --- blocks -----------------------------------------------------------------------------------

    def _request(self, index: int, *, ahead: bool = False) -> Future[bytes] | None:
        """The cached block as a done future, the one in flight, or a new fetch (None: no room for
        read-ahead)."""
        with self._lock:
            if not ahead:
                self._pinned.discard(index)
                failed = self._failed.pop(index, None)
                if failed is not None:  # a prefetch fetched it and failed: this read raises that
                    refused: Future[bytes] = Future()
                    refused.set_exception(failed)
                    return refused
            if index in self._cache:
                if not ahead:
                    self._cache.move_to_end(index)
                    self._counts["cache_hits"] += 1
                done: Future[bytes] = Future()
                done.set_result(self._cache[index])
                return done
            if index in self._inflight:
                return self._inflight[index]
            promoted = index in self._queued  # prefetched, still waiting for a worker: fetched now
            if promoted:
                del self._queued[index]
            elif ahead and (
                index in self._failed
                or len(self._cache) + len(self._inflight) >= self.cache_blocks
                or len(self._inflight) >= self.concurrency
            ):
                return None
            future = self._pool.submit(self._fetch, index)
            self._inflight[index] = future
            if ahead and not promoted:
                self._counts["readahead_blocks"] += 1
            return future

    def _fetch(self, index: int) -> bytes:
        try:
            data = self.api.fetch(index)
        except BaseException as exc:
            with self._lock:
                if isinstance(exc, ImageLintError):
                    self._failure = self._failure or exc
                self._inflight.pop(index, None)
                if index in self._pinned:  # prefetched: kept for the read that needs the block
                    self._pinned.discard(index)
                    self._failed[index] = exc
                self._prefetching.discard(index)
                self._pump()
            raise
        with self._lock:
            self._inflight.pop(index, None)
            self._prefetching.discard(index)
            self._pump()
            self._cache[index] = data
            self._evict()
            self._counts["blocks_fetched"] += 1
            self._counts["bytes_fetched"] += len(data)
            snapshot = dict(self._counts)
        if self.on_fetch is not None:
            self.on_fetch(snapshot)
        return data

    def _evict(self) -> None:
        """Drop least recently used blocks down to the bound, passing over prefetched blocks not read
        yet (at most three quarters of the cache, so there is always another to drop). Called with
        the lock held."""
        while len(self._cache) > self.cache_blocks:
            victim = next((i for i in self._cache if i not in self._pinned), None)
            if victim is None:
                return
            del self._cache[victim]

    def _block(self, index: int, future: Future[bytes] | None) -> bytes:
        if index not in self._allocated:
            with self._lock:
                self._counts["zero_block_reads"] += 1
            return ZERO_BLOCK
        assert future is not None
        try:
            return future.result()
        except ImageLintError as exc:
            raise OSError(f"{self.snapshot_id}: block {index}: {exc}") from exc

    def _read_ahead(self, last: int, sequential: bool, *, new_block: bool) -> None:
        """Grow the window on sequential reads that enter a new block; reset it on a jump."""
        if not sequential:
            self._streak = 0
            return
        if not new_block or not self.readahead:
            return
        self._streak += 1
        window = min(self.readahead, 1 << min(self._streak - 1, 30))
        ahead = [i for i in range(last + 1, last + 1 + window) if i in self._allocated]
        for index in ahead:
            if self._request(index, ahead=True) is None:
                break

    # --- results ----------------------------------------------------------------------------------

    @property
    def failure(self) -> ImageLintError | None:
        with self._lock:
            return self._failure

    def raise_if_failed(self) -> None:
        """The first fetch failure, as the error it was (one line, its exit code)."""
        failure = self.failure
        if failure is not None:
            raise failure

    def stats(self) -> dict[str, int]:
        counters = self.api.counters
        with self._lock:
            counts = dict(self._counts)
            counts["prefetch_unread"] = len(self._pinned) + len(self._failed)
        return {
            "block_size": BLOCK_SIZE,
            "volume_bytes": self.size,
            "blocks_listed": len(self.allocated),
            **counts,
            "list_requests": counters.list_requests,
            "get_requests": counters.get_requests,
            "retries": counters.retries,
            "throttled": counters.throttled,
            "checksum_retries": counters.checksum_retries,
            "relists": counters.relists,
            "concurrency": self.concurrency,
            "concurrency_lowest": self.api.window.lowest,
            "cache_bytes": self.cache_blocks * BLOCK_SIZE,
        }
