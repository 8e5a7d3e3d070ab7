"""Per-CPU saturation for the watch, from the /proc/stat sampler of issue 18.

Every ``cpu_every`` seconds (default 1 s) one read of ``/proc/stat`` (:class:`ProcStatReader`) is
diffed with the previous one and fed to an :class:`~imagelint.facts.hotcore.EpisodeTracker` with its
default thresholds: a CPU is *saturated* while at least 90 % of its time over a 1 s window is kernel
time and the other CPUs' kernel share is at most 50 % (their user time does not count). Exported:
each CPU's saturated seconds since the watch started (a counter, only for CPUs that have been
saturated: bounded by the CPU count) and the longest
episode still within the window. One read a second (not the soak's ten) keeps the cost near nothing;
an episode's length is then exact to a second.

The watch's own memory.stat walk is kernel time of its own making: :meth:`CpuWatch.mask` marks it,
and the interval that overlaps it is a bridged gap (not judged; an episode may continue across it).
"""

from __future__ import annotations

import os

from imagelint.facts.cpustat import ProcStat, ProcStatError, diff
from imagelint.facts.hotcore import EpisodeTracker, HotCoreParams
from imagelint.probes.cpu import ProcStatReader
from imagelint.watch.state import CpuSaturation


class CpuUnavailable(Exception):
    """The per-CPU source cannot be read."""


class CpuWatch:
    def __init__(
        self, proc_root: str = "/proc", window_seconds: float = 3600.0, params: HotCoreParams | None = None
    ) -> None:
        self.path = os.path.join(proc_root, "stat")
        self.window_seconds = window_seconds
        self.tracker = EpisodeTracker(params)
        self._reader: ProcStatReader | None = None
        self._prev: tuple[float, ProcStat] | None = None
        self._masked = False

    def mask(self) -> None:
        """The time since the last read must not be judged (the watch ran its own cgroup walk)."""
        self._masked = True

    def poll(self, now: float) -> CpuSaturation:
        try:
            if self._reader is None:
                self._reader = ProcStatReader(self.path)
            cur = self._reader.read()
        except ProcStatError as exc:
            if self._reader is not None:
                self._reader.close()
            self._reader, self._prev = None, None
            self.tracker.gap()
            raise CpuUnavailable(str(exc)) from None
        prev, self._prev = self._prev, (now, cur)
        if prev is not None:
            if self._masked:
                self.tracker.gap(bridge=True)
            else:
                self.tracker.feed(prev[0], now, diff(prev[1], cur))
        self._masked = False
        since = now - self.window_seconds
        self.tracker.episodes = [e for e in self.tracker.episodes if e.end > since]  # bounded memory
        longest = self.tracker.longest(since=since)
        return CpuSaturation(
            {str(cpu): s for cpu, s in sorted(self.tracker.saturated_seconds.items())},
            longest.seconds if longest else 0.0,
            str(longest.cpu) if longest else None,
        )
