"""The soak loop's timing and stopping, with a sampler that counts calls (kernel tests use the real one),
on a clock the test moves itself: the grid is checked exactly, whatever the machine's load."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from imagelint.facts.cgroups import CgroupLayout, Sample
from imagelint.facts.systemd.show import RestartSnapshot, UnitRestarts
from imagelint.soak.runner import SYSTEM_CLOCK, run_soak, stop_on_signals

LAYOUT = CgroupLayout("v1", "v1", None, None)
WALL = 1_700_000_000.0


class FakeClock:
    """Time that passes only when the loop waits or a sample takes ``delay`` (recorded in ``waits``)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return WALL + self.now

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        self.waits.append(seconds)
        if stop.is_set():
            return True
        self.now += seconds
        return False


class Counting:
    """dying grows by one per sample; each sample is stamped when it starts and takes ``delay`` s of
    ``clock`` (the system's clock: it really sleeps)."""

    def __init__(self, delay: float = 0.0, clock: FakeClock | None = None) -> None:
        self.calls = 0
        self.delay = delay
        self.clock = clock

    def sample(self) -> Sample:
        stamp = self.clock.monotonic() if self.clock else time.monotonic()
        if self.clock:
            self.clock.now += self.delay
        else:
            time.sleep(self.delay)
        self.calls += 1
        return Sample(stamp, WALL + stamp, LAYOUT, 10, self.calls, "proc_cgroups_minus_dirs", 10 + self.calls)


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
    clock = FakeClock()
    seen: list[int] = []
    result = run_soak(
        Counting(delay=0.03, clock=clock),
        duration=0.6,
        interval=0.1,
        on_sample=lambda s: seen.append(s.dying),
        restarts=lambda: next(snaps),
        clock=clock,
    )
    assert not result.cut_short
    assert len(result.samples) == 7 and seen == list(range(1, 8))
    # on the grid, not 0.13 s apart: the wait is the rest of the slot
    assert [s.monotonic for s in result.samples] == pytest.approx([0.1 * k for k in range(7)])
    assert clock.waits == pytest.approx([0.07] * 6)
    assert (result.started_wall, result.ended_wall) == (WALL, pytest.approx(WALL + 0.63))
    assert [(d.unit, d.restarts) for d in result.restart_deltas()] == [("a.service", 5)]
    trend = result.trend("dying")
    assert trend is not None and trend.slope_per_hour > 0
    assert result.to_dict()["trend"]["dying"]["n"] == 7


def test_slow_samples_skip_slots_instead_of_bursting() -> None:
    clock = FakeClock()
    result = run_soak(
        Counting(delay=0.25, clock=clock), duration=1.0, interval=0.1, restarts=None, clock=clock
    )
    # each sample overran two slots and a half: the next one waits for the next slot still ahead,
    # never catches up with a burst; the last one is taken at once when the end is already past
    assert [s.monotonic for s in result.samples] == pytest.approx([0.0, 0.3, 0.6, 0.9, 1.15])
    assert clock.waits == pytest.approx([0.05] * 3)


def test_a_zero_length_soak_takes_one_sample_and_never_waits() -> None:
    clock = FakeClock()
    result = run_soak(Counting(clock=clock), duration=0.0, interval=1.0, restarts=None, clock=clock)
    assert len(result.samples) == 1 and clock.waits == [] and not result.cut_short


def test_event_stops_early_and_keeps_what_was_measured() -> None:
    stop = threading.Event()
    clock = FakeClock()
    sampler = Counting(clock=clock)

    def on_sample(s: Sample) -> None:
        if sampler.calls == 3:
            stop.set()

    ended = []
    result = run_soak(
        sampler,
        duration=30.0,
        interval=1.0,
        on_sample=on_sample,
        stop=stop,
        restarts=lambda: ended.append(1) or RestartSnapshot(0, False, "n/a"),
        clock=clock,
    )
    assert result.cut_short and len(result.samples) == 3
    assert clock.now == 2.0  # did not sleep out the slot after the third sample
    assert ended == [1, 1]  # counters still read at the end


def test_the_system_clocks_wait_wakes_when_stop_is_set_from_another_thread() -> None:
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    assert SYSTEM_CLOCK.wait(stop, 600) is True  # a sleep that ignored stop would hold the test 10 min
    assert SYSTEM_CLOCK.wait(threading.Event(), 0.01) is False


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
