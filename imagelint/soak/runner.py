"""The soak loop: sample every ``interval`` for ``duration``, stoppable early, with restart counters.

Samples are scheduled on a fixed grid (t0, t0 + interval, ...) so a slow sample does not make the
series drift; slots a slow sample overran are skipped, never made up in a burst. The first sample
is taken at once and the last at ``duration``, so a 5-minute soak at 5 s gives 61 samples.

Stopping early: pass a :class:`threading.Event` and set it (from another thread, or from a signal
handler: :func:`stop_on_signals` installs one for SIGINT and SIGTERM and restores the old ones).
The loop wakes at once, keeps what it has, reads the end counters and returns ``cut_short=True``.
"""

from __future__ import annotations

import contextlib
import math
import resource
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from imagelint.facts.cgroups import ProbeResult, Sample
from imagelint.soak.restarts import RestartDelta, RestartSnapshot, collect_restart_counters, restart_deltas
from imagelint.soak.stats import DEFAULT_ALPHA, Trend, analyse, dying_ratio


class SampleSource(Protocol):
    def sample(self) -> Sample: ...


@dataclass
class SoakResult:
    """Everything a soak measured. ``cut_short`` is True when it was stopped before ``duration``."""

    duration: float
    interval: float
    samples: list[Sample]
    cut_short: bool
    started_wall: float
    ended_wall: float
    restarts_start: RestartSnapshot | None = None
    restarts_end: RestartSnapshot | None = None
    sampler_cpu_seconds: float = 0.0  # CPU (user + system) this thread spent inside sample() calls
    errors: list[str] = field(default_factory=list)
    walks: list[tuple[float, ProbeResult]] = field(default_factory=list)  # (s since first sample, walk)

    @property
    def elapsed(self) -> float:
        return self.samples[-1].monotonic - self.samples[0].monotonic if len(self.samples) > 1 else 0.0

    def series(self, name: str) -> tuple[list[float], list[float]]:
        """(seconds since the first sample, values) of ``live`` or ``dying``, skipping unknown values."""
        if not self.samples:
            return [], []
        t0 = self.samples[0].monotonic
        times: list[float] = []
        values: list[float] = []
        for s in self.samples:
            v = getattr(s, name)
            if v is not None:
                times.append(s.monotonic - t0)
                values.append(float(v))
        return times, values

    def trend(self, name: str = "dying", *, alpha: float = DEFAULT_ALPHA) -> Trend | None:
        """The series' trend, or None with fewer than 3 known samples."""
        times, values = self.series(name)
        if len(values) < 3 or times[-1] <= times[0]:
            return None
        return analyse(times, values, alpha=alpha)

    def ratio(self) -> float | None:
        """dying : live at the last sample."""
        return dying_ratio(self.samples[-1].dying, self.samples[-1].live) if self.samples else None

    def restart_deltas(self) -> list[RestartDelta]:
        if self.restarts_start is None or self.restarts_end is None:
            return []
        return restart_deltas(self.restarts_start, self.restarts_end)

    def to_dict(self) -> dict[str, Any]:
        dying, live = self.trend("dying"), self.trend("live")
        return {
            "duration": self.duration,
            "interval": self.interval,
            "elapsed": self.elapsed,
            "cut_short": self.cut_short,
            "started_wall": self.started_wall,
            "ended_wall": self.ended_wall,
            "samples": [s.to_dict() for s in self.samples],
            "trend": {"dying": dying.to_dict() if dying else None, "live": live.to_dict() if live else None},
            "dying_live_ratio": self.ratio(),
            "restarts": {
                "start": self.restarts_start.to_dict() if self.restarts_start else None,
                "end": self.restarts_end.to_dict() if self.restarts_end else None,
                "deltas": [d.to_dict() for d in self.restart_deltas()],
            },
            "sampler_cpu_seconds": self.sampler_cpu_seconds,
            "errors": list(self.errors),
        }


def _thread_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime


def run_soak(
    sampler: SampleSource,
    *,
    duration: float,
    interval: float,
    on_sample: Callable[[Sample], None] | None = None,
    stop: threading.Event | None = None,
    restarts: Callable[[], RestartSnapshot] | None = collect_restart_counters,
    clock: Callable[[], float] = time.monotonic,
    probe: Callable[[], ProbeResult] | None = None,
    probe_every: int = 0,
) -> SoakResult:
    """Sample every ``interval`` seconds for ``duration`` seconds; see the module docstring.

    ``restarts`` is called once before the first and once after the last sample (None: skip).
    ``probe`` (the memory.stat walk) is timed after every ``probe_every``-th sample (not the first).
    Errors from the sampler propagate (a soak must not pass on data it did not see); errors from
    ``on_sample`` are the caller's and propagate too.
    """
    if interval <= 0 or duration < 0:
        raise ValueError("interval must be > 0 and duration >= 0")
    stop = stop or threading.Event()
    started_wall = time.time()
    before = restarts() if restarts else None
    samples: list[Sample] = []
    cpu = 0.0
    t0 = clock()
    k = 0
    due = 0.0
    cut_short = False
    walks: list[tuple[float, ProbeResult]] = []
    while True:
        c0 = _thread_cpu()
        sample = sampler.sample()
        cpu += _thread_cpu() - c0
        samples.append(sample)
        if on_sample is not None:
            on_sample(sample)
        if (
            probe is not None
            and probe_every > 0
            and len(samples) > 1
            and (len(samples) - 1) % probe_every == 0
        ):
            walks.append((sample.monotonic - samples[0].monotonic, probe()))
        if due >= duration:
            break
        # the next slot on the grid that is still ahead (slots a slow sample overran are skipped)
        k = max(k + 1, math.floor((clock() - t0) / interval) + 1)
        due = min(k * interval, duration)
        wait = t0 + due - clock()
        if stop.is_set() or (wait > 0 and stop.wait(wait)):
            cut_short = True
            break
    after = restarts() if restarts else None
    result = SoakResult(duration, interval, samples, cut_short, started_wall, time.time(), before, after, cpu)
    result.walks = walks
    return result


@contextlib.contextmanager
def stop_on_signals(
    stop: threading.Event, signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)
) -> Iterator[None]:
    """Within the block, SIGINT/SIGTERM set ``stop`` instead of killing; old handlers come back after.

    A second signal of the same kind while stopping restores the old handler's behaviour by raising
    KeyboardInterrupt (so a stuck soak can still be interrupted). Main thread only.
    """
    previous = {sig: signal.getsignal(sig) for sig in signals}

    def handler(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    try:
        for sig in signals:
            signal.signal(sig, handler)
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
