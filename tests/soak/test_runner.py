"""The soak loop's timing and stopping, with a sampler that counts calls (kernel tests use the real one)."""

from __future__ import annotations

import os
import signal
import threading
import time

from imagelint.facts.cgroups import CgroupLayout, Sample
from imagelint.facts.systemd.show import RestartSnapshot, UnitRestarts
from imagelint.soak.runner import run_soak, stop_on_signals

LAYOUT = CgroupLayout("v1", "v1", None, None)


class Counting:
    """dying grows by one per sample; each sample can be made slow."""

    def __init__(self, delay: float = 0.0) -> None:
        self.calls = 0
        self.delay = delay

    def sample(self) -> Sample:
        time.sleep(self.delay)
        self.calls += 1
        return Sample(
            time.monotonic(), time.time(), LAYOUT, 10, self.calls, "proc_cgroups_minus_dirs", 10 + self.calls
        )


def test_full_soak_samples_on_a_fixed_grid_and_reads_counters_twice() -> None:
    snaps = iter(
        [
            RestartSnapshot(
                0.0, True, None, {"a.service": UnitRestarts("a.service", 1, "active", "running")}
            ),
            RestartSnapshot(
                1.0, True, None, {"a.service": UnitRestarts("a.service", 6, "active", "running")}
            ),
        ]
    )
    seen: list[int] = []
    result = run_soak(
        Counting(),
        duration=0.6,
        interval=0.1,
        on_sample=lambda s: seen.append(s.dying),
        restarts=lambda: next(snaps),
    )
    assert not result.cut_short
    assert len(result.samples) == 7 and seen == list(range(1, 8))
    offsets = [s.monotonic - result.samples[0].monotonic for s in result.samples]
    for k, off in enumerate(offsets):
        assert abs(off - 0.1 * k) < 0.05, offsets
    assert [(d.unit, d.restarts) for d in result.restart_deltas()] == [("a.service", 5)]
    trend = result.trend("dying")
    assert trend is not None and trend.slope_per_hour > 0
    assert result.to_dict()["trend"]["dying"]["n"] == 7


def test_slow_samples_skip_slots_instead_of_bursting() -> None:
    result = run_soak(Counting(delay=0.25), duration=1.0, interval=0.1, restarts=None)
    gaps = [b.monotonic - a.monotonic for a, b in zip(result.samples, result.samples[1:], strict=False)]
    assert all(g >= 0.2 for g in gaps), gaps  # never a catch-up burst
    assert result.samples[-1].monotonic - result.samples[0].monotonic <= 1.0 + 0.3


def test_event_stops_early_and_keeps_what_was_measured() -> None:
    stop = threading.Event()
    sampler = Counting()

    def on_sample(s: Sample) -> None:
        if sampler.calls == 3:
            threading.Timer(0.05, stop.set).start()

    ended = []
    t0 = time.monotonic()
    result = run_soak(
        sampler,
        duration=30.0,
        interval=1.0,
        on_sample=on_sample,
        stop=stop,
        restarts=lambda: ended.append(1) or RestartSnapshot(0, False, "n/a"),
    )
    assert time.monotonic() - t0 < 5.0  # woke at once, did not sleep out the interval
    assert result.cut_short and len(result.samples) == 3
    assert ended == [1, 1]  # counters still read at the end


def test_sigterm_during_a_soak_ends_it_cut_short_and_restores_the_handler() -> None:
    stop = threading.Event()
    before = signal.getsignal(signal.SIGTERM)
    sampler = Counting()

    def on_sample(s: Sample) -> None:
        if sampler.calls == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    with stop_on_signals(stop):
        result = run_soak(sampler, duration=30.0, interval=0.5, on_sample=on_sample, stop=stop, restarts=None)
    assert result.cut_short and stop.is_set() and len(result.samples) == 2
    assert signal.getsignal(signal.SIGTERM) is before
