"""Per-CPU time of the running host: ``/proc/stat`` kept open and re-read, ten times a second in a thread.

:class:`ProcStatReader` reads the file (one generation per read, capped) and hands the text to
:func:`imagelint.facts.cpustat.parse_proc_stat`.

:class:`CpuSampler` runs beside the soak's own loop (a thread, so that a slow cgroup sample, which on
an affected host takes seconds in the kernel, does not stop the CPU reads exactly when they matter).
Reads follow a fixed grid of ``period`` seconds and are kept in a
:class:`~imagelint.facts.cpurecord.CpuRecord`, so that thresholds can be applied afterwards, by the
rule, with its parameters.

``masked()`` marks time that must not be judged: the soak times its own ``memory.stat`` walk inside
it, since that walk is itself kernel time on one CPU. Intervals that overlap it are gaps.

Memory is bounded: at most ``max_cpu_intervals`` (CPUs × reads) are kept, and the period is widened
up front so that a soak of the announced ``duration`` fits; past the cap reads stop being kept, and
the record says so.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator

from imagelint.facts.cpurecord import DEFAULT_MAX_CPU_INTERVALS, CpuRecord
from imagelint.facts.cpustat import ProcStat, ProcStatError, parse_proc_stat
from imagelint.facts.hotcore import EpisodeTracker

DEFAULT_PERIOD = 0.1
DEFAULT_MAX_BYTES = 4 << 20  # /proc/stat of a 4,096-CPU host with its intr line stays well below


class ProcStatReader:
    """``/proc/stat`` kept open and re-read from offset 0 (the kernel regenerates it on each read).

    Reads are capped at ``max_bytes``; a file that does not end within the cap is an error, never a
    partial parse. Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, path: str = "/proc/stat", *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        try:
            self._fd: int | None = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise ProcStatError(f"cannot open: {exc.strerror}", where=path) from None
        self._buffer = bytearray(min(65536, max_bytes + 1))

    def read_text(self) -> str:
        """The whole file from one read call (one generation of it); the buffer grows up to the cap."""
        if self._fd is None:
            raise ProcStatError("read after close", where=self.path)
        while True:
            try:
                size = os.preadv(self._fd, [self._buffer], 0)
            except OSError as exc:
                raise ProcStatError(f"cannot read: {exc.strerror}", where=self.path) from None
            if size < len(self._buffer):
                return self._buffer[:size].decode("ascii", errors="replace")
            if len(self._buffer) > self.max_bytes:
                raise ProcStatError(f"larger than {self.max_bytes} bytes", where=self.path)
            self._buffer = bytearray(min(len(self._buffer) * 4, self.max_bytes + 1))

    def read(self) -> ProcStat:
        return parse_proc_stat(self.read_text(), where=self.path)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ProcStatReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CpuSampler:
    """A background thread reading ``/proc/stat`` every ``period`` s until :meth:`stop`; see the module.

    For a live view (``imagelint watch``), pass ``tracker``: each read is fed to it as it comes, under
    :attr:`lock` (hold the lock to read its counters), and ``keep=False`` keeps no record of reads, so
    memory stays flat however long it runs (the record then holds counts, events and cost only).
    """

    def __init__(
        self,
        period: float = DEFAULT_PERIOD,
        *,
        duration: float | None = None,
        path: str = "/proc/stat",
        max_cpu_intervals: int = DEFAULT_MAX_CPU_INTERVALS,
        clock: Callable[[], float] = time.monotonic,
        tracker: EpisodeTracker | None = None,
        keep: bool = True,
    ) -> None:
        self._reader = ProcStatReader(path)  # fails here, before the soak, if there is no /proc/stat
        self._clock = clock
        self._first = self._reader.read()
        cpus = len(self._first.cpus)
        if duration:
            period = max(period, duration * cpus / max_cpu_intervals)
        self.record = CpuRecord(period, clock(), online=sorted(self._first.cpus))
        self.record.reads = 1
        self.record.columns_note = self._first.note()
        self.record.max_cpu_intervals = max_cpu_intervals
        self.record.keep = keep
        self.tracker = tracker
        self.lock = threading.Lock()  # guards the live tracker
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._mask_depth = 0
        self._mask_dirty = False
        self._thread = threading.Thread(target=self._run, name="imagelint-cpustat", daemon=True)

    def start(self) -> CpuSampler:
        self._thread.start()
        return self

    def stop(self) -> CpuRecord:
        """Stop the thread (after one last read) and return the record."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._reader.close()
        return self.record

    def __enter__(self) -> CpuSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @contextlib.contextmanager
    def masked(self) -> Iterator[None]:
        """Intervals that overlap this block are gaps (e.g. imagelint's own cgroup walk)."""
        with self._lock:
            self._mask_depth += 1
            self._mask_dirty = True
        try:
            yield
        finally:
            with self._lock:
                self._mask_depth -= 1

    def _run(self) -> None:
        record, period = self.record, self.record.period
        prev, t_prev, k = self._first, record.origin, 0
        while True:
            k = max(k + 1, int((self._clock() - record.origin) / period) + 1)
            wait = record.origin + k * period - self._clock()
            last = self._stop.wait(wait) if wait > 0 else self._stop.is_set()
            if wait <= 0:
                record.late += 1
            c0 = time.thread_time()
            try:
                cur, t = self._reader.read(), self._clock()
            except ProcStatError as exc:
                record.error = str(exc)
                return
            with self._lock:
                gap = self._mask_dirty
                if self._mask_depth == 0:
                    self._mask_dirty = False
            interval = self.record.add(prev, cur, t_prev, t, masked=gap)
            if self.tracker is not None:
                with self.lock:
                    if gap:
                        self.tracker.gap(bridge=True)
                    else:
                        self.tracker.feed(t_prev, t, interval)
            record.reads += 1
            record.cpu_seconds += time.thread_time() - c0
            prev, t_prev = cur, t
            if last:
                return
