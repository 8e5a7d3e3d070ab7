"""Hot-core episodes: one CPU saturated in the kernel while the other CPUs' kernel time stays low.

The incident's symptom: a cgroup walk pinned one core at 100% *system* time for seconds, starving
the NIC's NAPI poll on that core, while the all-CPU average (what dashboards show) stayed low.

:class:`EpisodeTracker` is fed consecutive per-CPU intervals (:class:`~imagelint.facts.cpustat.Interval`,
e.g. ten a second) and judges each CPU on a trailing **window** of ``window_seconds`` (default 1 s):

- *saturated*: the CPU's kernel share (system + irq + softirq over its total ticks) in the window is
  at least ``min_kernel_share`` (0.9), **and** the other online CPUs' *kernel* share over the same
  window is at most ``max_others_kernel_share`` (0.5): the kernel time is lopsided, piled on this
  core. What the other CPUs do in *user* time does not count: the incident's hosts were GPU training
  nodes whose other cores were busy with data loaders and the training process (user time) while
  the cgroup walk pinned one core in the kernel, and a loaded CI runner looks the same. An earlier
  version asked for the others to be at most 50% *busy* (any time), so a hot core beside busy ones
  went unseen. Kernel time spread evenly over every core (a host-wide syscall or interrupt storm)
  is not one core starved and stays quiet. The other CPUs are used rather than the all-CPU
  average because on a small host the hot core alone moves the average (one saturated core of 2 is
  50%). The others' busy share and the all-CPU average are reported beside it (what a dashboard
  showed). With a single online CPU there are no others (their kernel share is taken as 0).
- an **episode** is a run of consecutive reads in which the same CPU is saturated; it runs from the
  first to the last read, within its saturated windows, that is itself at ``min_kernel_share``
  (so its length is exact to one read, not one window).

Why a window and not each read: ``/proc/stat`` counts in ticks of 10 ms (USER_HZ = 100), so a 100 ms
read holds about 10 ticks and its share moves in steps of 10%: a core 95% in the kernel shows 80%
or less in about one read of twelve by chance alone. A 1 s window holds about 100 ticks (1% steps).

A gap (time not judged) ends every open episode; a *bridged* gap (time excluded on purpose: while
imagelint itself walks the memory cgroups, which is kernel time of its own making) lets an episode
continue across it when its CPU is still saturated once its window has refilled after it. A CPU that
went offline, or whose counters went backwards, ends its own episode.

``saturated_seconds`` per CPU only ever grows: ``imagelint watch`` exposes it as a counter.
"""

from __future__ import annotations

from collections import deque
from dataclasses import field
from typing import TYPE_CHECKING, Any

from imagelint.records import dataclass

if TYPE_CHECKING:
    from imagelint.facts.cpustat import CpuDelta, Interval

LISTED_EPISODES = 20  # in the report's facts; all are counted
# closed episodes kept: one per saturated run, at most one per two reads of one CPU, so a record of a
# million reads of a CPU flapping every read would hold half a million; past this the tracker stops
# keeping them and says so (``overflowed``): what it reports is then incomplete
MAX_EPISODES = 100_000


@dataclass(frozen=True)
class HotCoreParams:
    min_kernel_share: float = 0.9
    max_others_kernel_share: float = 0.5
    window_seconds: float = 1.0


@dataclass(slots=True)
class Episode:
    """One run of saturation of one CPU; shares are the extremes over the run's windows."""

    cpu: int
    start: float
    end: float
    peak_kernel_share: float  # the highest windowed kernel share
    max_others_kernel_share: float  # the other CPUs' kernel share at its highest during the run
    max_others_busy: float  # the other CPUs' busy share (any time) at its highest: context only
    max_average_busy: float  # the all-CPU average at its highest during the run
    kernel_ticks: int = 0  # from start to end (a bridged gap left out)
    total_ticks: int = 0
    _ticks_until: float = field(default=float("-inf"), repr=False)

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def kernel_share(self) -> float:
        """Kernel time over all of the episode's time (dips inside it included)."""
        return self.kernel_ticks / self.total_ticks if self.total_ticks else 0.0

    def to_dict(self, origin: float = 0.0) -> dict[str, Any]:
        return {
            "cpu": self.cpu,
            "start": round(self.start - origin, 3),
            "seconds": round(self.seconds, 3),
            "kernel_share": round(self.kernel_share, 3),
            "peak_kernel_share": round(self.peak_kernel_share, 3),
            "max_others_kernel_share": round(self.max_others_kernel_share, 3),
            "max_others_busy": round(self.max_others_busy, 3),
            "max_average_busy": round(self.max_average_busy, 3),
        }


@dataclass
class _Window:
    parts: deque[tuple[float, float, CpuDelta]] = field(default_factory=deque)
    kernel: int = 0
    busy: int = 0
    total: int = 0

    def add(self, t0: float, t1: float, delta: CpuDelta, seconds: float) -> None:
        if self.parts and abs(self.parts[-1][1] - t0) > 1e-9:
            self.clear()  # not contiguous with what came before
        self.parts.append((t0, t1, delta))
        self.kernel += delta.kernel
        self.busy += delta.busy
        self.total += delta.total
        while len(self.parts) > 1 and t1 - self.parts[1][0] >= seconds:
            _, _, old = self.parts.popleft()
            self.kernel -= old.kernel
            self.busy -= old.busy
            self.total -= old.total

    def clear(self) -> None:
        self.parts.clear()
        self.kernel = self.busy = self.total = 0

    @property
    def start(self) -> float:
        return self.parts[0][0]

    def hot_span(self, min_share: float) -> tuple[float, float]:
        """From the first to the end of the last read in the window that is itself at ``min_share``."""
        hot = [(t0, t1) for t0, t1, d in self.parts if d.kernel_share >= min_share] or [self.parts[-1][:2]]
        return hot[0][0], hot[-1][1]

    def covers(self, t1: float, seconds: float) -> bool:
        return bool(self.parts) and t1 - self.start >= seconds * (1 - 1e-6)


class EpisodeTracker:
    """Feed it intervals in time order (:meth:`feed`, :meth:`gap`); read episodes and counters any time."""

    def __init__(self, params: HotCoreParams | None = None) -> None:
        self.params = params or HotCoreParams()
        self.saturated_seconds: dict[int, float] = {}
        self.episodes: list[Episode] = []  # closed, in order of ending (at most one per window of time)
        self.overflowed = False  # more than MAX_EPISODES closed: the later ones were not kept
        self.fed = 0  # intervals fed so far
        self._windows: dict[int, _Window] = {}
        self._open: dict[int, Episode] = {}
        self._bridged: set[int] = set()  # CPUs whose open episode waits across a bridged gap
        self._counted: dict[int, float] = {}  # saturated time counted up to here, per CPU

    # -- input ---------------------------------------------------------------------------------

    def feed(self, t0: float, t1: float, interval: Interval) -> None:
        """The interval from ``t0`` to ``t1`` (seconds on one monotonic clock)."""
        if t1 <= t0:
            return
        self.fed += 1
        p = self.params
        for cpu in [c for c in self._windows if c not in interval.deltas]:
            self._windows.pop(cpu).clear()  # offline, backwards or no ticks: its history ends here
            self._close(cpu)
        ready: dict[int, _Window] = {}
        for cpu, delta in interval.deltas.items():
            window = self._windows.setdefault(cpu, _Window())
            window.add(t0, t1, delta, p.window_seconds)
            if window.covers(t1, p.window_seconds) and window.total > 0:
                ready[cpu] = window
        kernel = sum(w.kernel for w in ready.values())
        busy = sum(w.busy for w in ready.values())
        total = sum(w.total for w in ready.values())
        average = busy / total if total else 0.0
        for cpu, w in ready.items():
            others_total = total - w.total
            others_kernel = (kernel - w.kernel) / others_total if others_total else 0.0
            others_busy = (busy - w.busy) / others_total if others_total else 0.0
            share = w.kernel / w.total
            if share >= p.min_kernel_share and others_kernel <= p.max_others_kernel_share:
                self._extend(cpu, w, share, (others_kernel, others_busy), average)
            else:
                self._close(cpu)
        for cpu in [c for c in self._open if c not in ready]:
            if cpu not in self._bridged or cpu not in interval.deltas:
                self._close(cpu)

    def gap(self, *, bridge: bool = False) -> None:
        """Time that is not judged: windows restart after it. Without ``bridge`` every open episode
        ends here; with it, an episode goes on if its CPU is saturated once its window has refilled."""
        if bridge:
            self._bridged.update(self._open)
        else:
            for cpu in list(self._open):
                self._close(cpu)
        for window in self._windows.values():
            window.clear()

    def close(self) -> None:
        """The end of the data: open episodes become closed ones."""
        self.gap()

    # -- output --------------------------------------------------------------------------------

    def open_episodes(self) -> list[Episode]:
        return list(self._open.values())

    def longest(self, *, since: float | None = None) -> Episode | None:
        """The longest episode (open ones included); with ``since``, among those still running after it."""
        pool = [*self.episodes, *self._open.values()]
        if since is not None:
            pool = [e for e in pool if e.end > since]
        return max(pool, key=lambda e: e.seconds, default=None)

    # -- internals -----------------------------------------------------------------------------

    def _extend(
        self, cpu: int, window: _Window, share: float, others: tuple[float, float], average: float
    ) -> None:
        """``others``: the other CPUs' (kernel share, busy share) over the same window."""
        start, end = window.hot_span(self.params.min_kernel_share)
        self._bridged.discard(cpu)
        episode = self._open.get(cpu)
        if episode is None:
            episode = self._open[cpu] = Episode(cpu, start, start, share, *others, average)
        counted = max(episode.end, self._counted.get(cpu, episode.end))
        self.saturated_seconds[cpu] = self.saturated_seconds.get(cpu, 0.0) + max(0.0, end - counted)
        episode.end = max(episode.end, end)
        self._counted[cpu] = max(counted, end)
        for t0, t1, delta in window.parts:
            if t0 >= max(episode.start, episode._ticks_until) - 1e-9 and t1 <= episode.end + 1e-9:
                episode.kernel_ticks += delta.kernel
                episode.total_ticks += delta.total
                episode._ticks_until = t1
        episode.peak_kernel_share = max(episode.peak_kernel_share, share)
        episode.max_others_kernel_share = max(episode.max_others_kernel_share, others[0])
        episode.max_others_busy = max(episode.max_others_busy, others[1])
        episode.max_average_busy = max(episode.max_average_busy, average)

    def _close(self, cpu: int) -> None:
        self._bridged.discard(cpu)
        episode = self._open.pop(cpu, None)
        if episode is None:
            return
        if len(self.episodes) >= MAX_EPISODES:
            self.overflowed = True
            return
        self.episodes.append(episode)


@dataclass
class HotCoreSummary:
    """Episodes of at least ``min_seconds``: how many, the longest, on which CPUs, for how long in all."""

    min_seconds: float
    episodes: list[Episode]  # those of at least min_seconds, by start
    saturated_seconds: dict[int, float]  # per CPU, over all episodes of any length
    complete: bool = True  # False: past MAX_EPISODES, episodes were not all kept

    @property
    def count(self) -> int:
        return len(self.episodes)

    @property
    def longest(self) -> Episode | None:
        return max(self.episodes, key=lambda e: e.seconds, default=None)

    @property
    def cpus(self) -> list[int]:
        return sorted({e.cpu for e in self.episodes})

    def to_dict(self, origin: float = 0.0) -> dict[str, Any]:
        longest = self.longest
        return {
            "min_seconds": self.min_seconds,
            "count": self.count,
            "cpus": self.cpus,
            "longest": longest.to_dict(origin) if longest else None,
            "saturated_seconds": {f"cpu{c}": round(s, 3) for c, s in sorted(self.saturated_seconds.items())},
            "episodes": [e.to_dict(origin) for e in self.episodes[:LISTED_EPISODES]],
            "complete": self.complete,
        }


def summarise(tracker: EpisodeTracker, min_seconds: float) -> HotCoreSummary:
    """The tracker's episodes (closed and open) of at least ``min_seconds``."""
    long = [e for e in [*tracker.episodes, *tracker.open_episodes()] if e.seconds >= min_seconds]
    return HotCoreSummary(
        min_seconds,
        sorted(long, key=lambda e: e.start),
        dict(tracker.saturated_seconds),
        complete=not tracker.overflowed,
    )
