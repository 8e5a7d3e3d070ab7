"""The EBS readers' call window: halved once per throttled round, grown by one per window of
answers, never below one call or above its ceiling, and a full window makes callers wait."""

from __future__ import annotations

import threading

import pytest

from imagelint.aws.call_window import CallWindow


def test_throttled_calls_of_one_round_cut_once() -> None:
    window = CallWindow(16)
    rounds = []
    for _ in range(16):
        with window.slot() as started:
            rounds.append(started)
    for started in rounds:  # sixteen calls of the same round throttled together
        window.throttled(started)
    assert window.size == 8 and window.cuts == 1 and window.lowest == 8
    with window.slot() as started:
        pass
    window.throttled(started)  # a call of the new round cuts again
    assert window.size == 4 and window.cuts == 2


def test_the_window_never_goes_below_one_nor_above_its_ceiling() -> None:
    window = CallWindow(4)
    for _ in range(10):
        with window.slot() as started:
            pass
        window.throttled(started)
    assert window.size == 1 and window.lowest == 1
    for _ in range(1000):
        window.answered()
    assert window.size == 4


def test_answers_grow_the_window_by_one_per_window_of_answers() -> None:
    window = CallWindow(16)
    with window.slot() as started:
        pass
    window.throttled(started)
    window.throttled(started)  # same round: no second cut
    assert window.size == 8
    for _ in range(8):  # a window's worth of answers (each adds 1/size): not quite one call yet
        window.answered()
    assert window.size == 8
    window.answered()
    assert window.size == 9


def test_a_full_window_makes_the_next_call_wait() -> None:
    window = CallWindow(1)
    entered = threading.Event()

    def second_call() -> None:
        with window.slot():
            entered.set()

    with window.slot():
        waiter = threading.Thread(target=second_call)
        waiter.start()
        assert not entered.wait(0.2)  # the window is full
    assert entered.wait(5)  # ... until the first call ends
    waiter.join(timeout=5)


def test_a_window_holds_at_least_one_call() -> None:
    with pytest.raises(ValueError):
        CallWindow(0)
