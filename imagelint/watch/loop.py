"""The watch loop: each source on its own period, one immutable state published after every pass.

Periods (defaults in :class:`WatchSettings`): memory-cgroup sample every ``interval`` (the trend's
window keeps ``window`` seconds of them), ``systemctl show`` every ``units_every``, the journal every
``journal_every``, the memory.stat walk every ``walk_every`` (it is the symptom's own cost, so it runs
rarely), one ``/proc/stat`` read every ``cpu_every`` (per-CPU saturation), the soak rules every
``judge_every``. Passes are scheduled on a fixed grid; a slow pass skips
slots rather than bunching them.

A source that fails is marked down with its reason (``imagelint_source_up 0``) and retried at its next
period; the transition is written to stderr once (``imagelint: warning: watch: SOURCE: WHY``), and
again when it comes back. An unexpected exception in a source is treated the same way: the loop never
dies silently and never stops the other sources.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from imagelint.facts.cgroups import CgroupReadError, ProbeResult, Sample
from imagelint.facts.systemd.show import RestartSnapshot
from imagelint.facts.trend import DEFAULT_ALPHA, Trend
from imagelint.probes.cgroups import CgroupSampler, probe_memory_stat
from imagelint.probes.journal import JournalUnavailable
from imagelint.probes.systemd import collect_live_state
from imagelint.records import dataclass
from imagelint.watch.cpu import CpuUnavailable, CpuWatch
from imagelint.watch.journal import DEFAULT_JOURNAL_DIR, SignalCounter
from imagelint.watch.state import CpuSaturation, RuleOutcome, SourceStatus, WatchState
from imagelint.watch.units import MAX_LABELLED_UNITS, UnitSelection, UnitTracker, restart_snapshot
from imagelint.watch.window import DEFAULT_MAX_SAMPLES, SampleWindow

if TYPE_CHECKING:
    from imagelint.session import PreparedRun


@dataclass(frozen=True)
class WatchSettings:
    interval: float = 10.0
    window: float = 3600.0
    max_samples: int = DEFAULT_MAX_SAMPLES
    units_every: float = 30.0
    journal_every: float = 10.0
    walk_every: float = 60.0
    cpu_every: float = 1.0
    judge_every: float = 300.0
    journal_dir: str = DEFAULT_JOURNAL_DIR
    journal_from_start: bool = False
    proc_root: str = "/proc"
    cgroup_root: str = "/sys/fs/cgroup"
    systemctl: str = "systemctl"
    systemctl_prefix: tuple[str, ...] = ()
    max_units: int = MAX_LABELLED_UNITS
    loop_restarts: int = 3
    alpha: float = DEFAULT_ALPHA


class _Unavailable(Exception):
    """A source has nothing to give this pass (the reason is the message)."""


class _NotYet(Exception):
    """A source is not due to report yet (the rules before the window has 3 samples): status unchanged."""


class Watcher:
    """Runs the sources; ``state`` is the latest snapshot. ``rules``: the prepared run to judge, or None."""

    def __init__(
        self,
        settings: WatchSettings,
        *,
        rules: PreparedRun | None = None,
        warn: Callable[[str], None] = lambda line: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.rules = rules
        self.warn = warn
        self.clock = clock
        s = settings
        self._window = SampleWindow(s.window, s.max_samples)
        self._units = UnitTracker(s.window, cap=s.max_units, loop_restarts=s.loop_restarts)
        self._signals = SignalCounter(s.journal_dir, from_start=s.journal_from_start)
        self._cpu = CpuWatch(s.proc_root, s.window)
        self._sampler: CgroupSampler | None = None
        self._sources: dict[str, SourceStatus] = {}
        self._last_sample: Sample | None = None
        self._trend: Trend | None = None
        self._unreadable_said: set[str] = set()
        self._walk: ProbeResult | None = None
        self._selection = UnitSelection((), 0, 0, 0)
        self._snapshots: deque[tuple[float, RestartSnapshot]] = deque()
        self._verdicts: tuple[RuleOutcome, ...] = ()
        self._cpu_state: CpuSaturation | None = None
        self._due: dict[str, float] = {}
        self._passes = 0
        self.started_wall = time.time()
        self.state = WatchState(self.started_wall)
        self._tasks: list[tuple[str, float, Callable[[float], None]]] = [
            ("cgroups", s.interval, self._sample_cgroups),
            ("memory_stat", s.walk_every, self._walk_memory_stat),
            ("systemd", s.units_every, self._poll_units),
            ("journal", s.journal_every, self._poll_journal),
            ("cpu", s.cpu_every, self._poll_cpu),
            ("rules", s.judge_every, self._judge),
        ]
        if rules is None:
            self._tasks = [t for t in self._tasks if t[0] != "rules"]

    # -- sources ---------------------------------------------------------------------------------

    def _sample_cgroups(self, now: float) -> None:
        s = self.settings
        try:
            if self._sampler is None:
                self._sampler = CgroupSampler(s.proc_root, s.cgroup_root, subtree_depth=1)
            sample = self._sampler.sample()
        except (CgroupReadError, OSError) as exc:
            self._sampler = None  # detect the layout again next time (a mount may appear)
            self._last_sample = None
            raise _Unavailable(str(exc)) from None
        self._last_sample = sample
        if sample.dying is None:
            self._sampler = None
            raise _Unavailable(sample.layout.note or "no memory cgroup counts on this host")
        self._window.add(sample)
        self._trend = self._window.trend(s.alpha)  # once per sample: its cost grows with the window squared

    def _walk_memory_stat(self, now: float) -> None:
        if self._sampler is None or self._sampler.layout.memory is None:
            raise _Unavailable("no memory cgroup hierarchy to walk")
        try:
            self._walk = probe_memory_stat(self._sampler.layout)
        finally:
            self._cpu.mask()  # the walk is our own kernel time: not judged as saturation

    def _poll_units(self, now: float) -> None:
        s = self.settings
        live = collect_live_state(prefix=s.systemctl_prefix, systemctl=s.systemctl)
        # the judge sees what this poll saw, as soak does: no manager (not applicable) or one that
        # did not answer (inconclusive while the window starts or ends on it)
        self._snapshots.append((now, restart_snapshot(live)))
        while len(self._snapshots) > 2 and self._snapshots[1][0] <= now - s.window:
            self._snapshots.popleft()
        if not live.available:
            self._selection = UnitSelection((), 0, 0, 0)
            raise _Unavailable(live.reason or "systemd did not answer")
        self._selection = self._units.update(live, now)

    def _poll_journal(self, now: float) -> None:
        try:
            self._signals.poll()
        except JournalUnavailable as exc:
            raise _Unavailable(str(exc)) from None
        stats = self._signals.stats
        unreadable = stats.unreadable
        for path in sorted(set(unreadable) - self._unreadable_said):
            self.warn(f"watch: journal: {path}: {unreadable[path]}")
        self._unreadable_said = set(unreadable)
        if stats.shrunk:  # entries may be missing until the file is whole again: not a full count
            raise _Unavailable("; ".join(f"{path}: {why}" for path, why in sorted(stats.shrunk.items())))

    def _poll_cpu(self, now: float) -> None:
        try:
            self._cpu_state = self._cpu.poll(now)
        except CpuUnavailable as exc:
            self._cpu_state = None
            raise _Unavailable(str(exc)) from None

    def _judge(self, now: float) -> None:
        from imagelint.watch.judge import judge_window

        assert self.rules is not None
        samples = self._window.samples
        if len(samples) < 3 or self._sampler is None:
            raise _NotYet
        first = self._snapshots[0][1] if self._snapshots else None
        last = self._snapshots[-1][1] if self._snapshots else None
        self._verdicts = judge_window(
            self.rules, samples, self._sampler.layout, (first, last), self._walk, self.settings.interval
        )

    # -- the loop --------------------------------------------------------------------------------

    def _set(self, name: str, status: SourceStatus) -> None:
        old = self._sources.get(name)
        self._sources[name] = status
        if status.up and old is not None and not old.up:
            self.warn(f"watch: {name}: available again")
        elif not status.up and (old is None or old.up or old.reason != status.reason):
            self.warn(f"watch: {name}: {status.reason}")

    def step(self) -> WatchState:
        """Run every source that is due, publish and return the new state."""
        now = self.clock()
        for name, period, task in self._tasks:
            if self._due.get(name, now) > now:
                continue
            self._due[name] = now + period
            try:
                task(now)
            except _NotYet:
                self._due[name] = now  # try again at the next pass
            except _Unavailable as exc:
                self._set(name, SourceStatus(False, str(exc)))
            except Exception as exc:  # a bug or an unforeseen host: reported, never fatal
                self._set(name, SourceStatus(False, f"unexpected {type(exc).__name__}: {exc}"))
            else:
                self._set(name, SourceStatus(True))
        self._passes += 1
        self.state = self._snapshot()
        return self.state

    def _snapshot(self) -> WatchState:
        sample = self._last_sample
        stats = self._signals.stats
        sel = self._selection
        walk = self._walk
        return WatchState(
            started_wall=self.started_wall,
            sources=dict(self._sources),
            passes=self._passes,
            live=sample.live if sample else None,
            dying=sample.dying if sample else None,
            dying_source=sample.dying_source if sample else None,
            trend=self._trend if sample else None,
            window_samples=len(self._window.samples),
            window_seconds=self._window.span_seconds,
            walk_seconds=walk.seconds if walk else None,
            walk_cgroups=walk.cgroups if walk else None,
            units=sel.shown,
            units_overflow=sel.overflow,
            units_loaded=sel.loaded,
            units_looping=sel.looping,
            signals=dict(self._signals.counts),
            journal_entries=stats.entries,
            journal_bad_entries=stats.bad_entries + self._signals.unmatched,
            journal_files=stats.files,
            journal_unreadable=len(stats.unreadable),
            verdicts=self._verdicts,
            cpu=self._cpu_state,
        )

    def run(
        self,
        stop: threading.Event,
        on_state: Callable[[WatchState], None] = lambda state: None,
        *,
        passes: int | None = None,
    ) -> None:
        """Step on a grid of the shortest period until ``stop`` is set (or ``passes`` passes)."""
        tick = min(period for _, period, _ in self._tasks)
        t0 = self.clock()
        k = 0
        while not stop.is_set():
            on_state(self.step())
            if passes is not None and self._passes >= passes:
                return
            k = max(k + 1, math.floor((self.clock() - t0) / tick) + 1)
            stop.wait(max(0.0, t0 + k * tick - self.clock()))
