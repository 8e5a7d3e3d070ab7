"""The soak loop: sample every ``interval`` for ``duration``, stoppable early, with restart counters.

Samples are scheduled on a fixed grid (t0, t0 + interval, ...) so a slow sample does not make the
series drift; slots a slow sample overran are skipped, never made up in a burst. The first sample
is taken at once and the last at ``duration``, so a 5-minute soak at 5 s gives 61 samples.

Stopping early: pass a :class:`threading.Event` and set it (from another thread, or from a signal
handler: :func:`stop_on_signals` installs one for SIGINT and SIGTERM and restores the old ones).
The loop wakes at once, keeps what it has, reads the end counters and returns ``cut_short=True``.

Time is read through a :class:`Clock` (the system's by default), so the grid can be checked on a
clock a test moves itself.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from imagelint.facts.cgroups import ProbeResult, Sample
from imagelint.facts.soak import SoakResult
from imagelint.facts.systemd.show import RestartSnapshot
from imagelint.probes.cgroups import thread_cpu
from imagelint.probes.systemd import collect_restart_counters


class SampleSource(Protocol):
    def sample(self) -> Sample: ...


class Clock(Protocol):
    """What the loop reads of time: a monotonic clock, the wall clock, and a wait that ``stop`` cuts
    short (True when it did)."""

    def monotonic(self) -> float: ...

    def wall(self) -> float: ...

    def wait(self, stop: threading.Event, seconds: float) -> bool: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        return stop.wait(seconds)


SYSTEM_CLOCK = SystemClock()


def run_soak(
    sampler: SampleSource,
    *,
    duration: float,
    interval: float,
    on_sample: Callable[[Sample], None] | None = None,
    stop: threading.Event | None = None,
    restarts: Callable[[], RestartSnapshot] | None = collect_restart_counters,
    clock: Clock = SYSTEM_CLOCK,
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
    started_wall = clock.wall()
    before = restarts() if restarts else None
    samples: list[Sample] = []
    cpu = 0.0
    t0 = clock.monotonic()
    k = 0
    due = 0.0
    cut_short = False
    walks: list[tuple[float, ProbeResult]] = []
    while True:
        c0 = thread_cpu()
        sample = sampler.sample()
        cpu += thread_cpu() - c0
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
        k = max(k + 1, math.floor((clock.monotonic() - t0) / interval) + 1)
        due = min(k * interval, duration)
        wait = t0 + due - clock.monotonic()
        if stop.is_set() or (wait > 0 and clock.wait(stop, wait)):
            cut_short = True
            break
    after = restarts() if restarts else None
    result = SoakResult(
        duration, interval, samples, cut_short, started_wall, clock.wall(), before, after, cpu
    )
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
