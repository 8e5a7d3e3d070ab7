"""SignalGuard: SIGINT/SIGTERM always end an AMI or fleet run as Interrupted (exit 3), after cleanup.

Real signals, sent to this process with os.kill; no handler is called by hand."""

from __future__ import annotations

import contextlib
import os
import signal
import time

import pytest

from imagelint.aws.signals import Interrupted, SignalGuard, _Signalled
from imagelint.errors import ExitCode


def _signal_self(signum: int = signal.SIGTERM) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(0.5)  # the handler runs at the next bytecode boundary, inside this sleep


def test_signal_inside_a_library_that_catches_exception_still_interrupts() -> None:
    # botocore's request path has ``except Exception`` blocks; the CI failure this guards against
    # was a SIGTERM whose exception one of them swallowed, after which the soak ran to its end
    guard = SignalGuard()
    with pytest.raises(Interrupted, match="interrupted by SIGTERM") as caught, guard.installed():
        with contextlib.suppress(Exception):
            _signal_self()
        pytest.fail("the signal was swallowed")
    assert caught.value.exit_code == ExitCode.INCONCLUSIVE


def test_checkpoint_raises_for_a_signal_whose_exception_was_swallowed() -> None:
    guard = SignalGuard()
    reached = []
    with pytest.raises(Interrupted, match="SIGINT"), guard.installed():
        with contextlib.suppress(BaseException):  # even this does not lose it: the next poll's
            _signal_self(signal.SIGINT)  # checkpoint raises again
        reached.append("after")
        guard.checkpoint()
        reached.append("past the checkpoint")
    assert reached == ["after"]


def test_signal_during_cleanup_lets_it_finish_then_stops_the_run() -> None:
    guard = SignalGuard()
    steps = []
    with pytest.raises(Interrupted, match="SIGTERM"), guard.installed():
        with guard.cleanup():
            _signal_self()
            steps.append("cleanup finished")
        steps.append("run went on")
    assert steps == ["cleanup finished"]


def test_cleanup_during_an_interrupt_runs_to_its_end_and_the_first_signal_is_reported() -> None:
    guard = SignalGuard()
    steps = []
    with pytest.raises(Interrupted, match="SIGTERM"), guard.installed():
        try:
            _signal_self(signal.SIGTERM)
        finally:
            with guard.cleanup():
                _signal_self(signal.SIGINT)  # a second Ctrl-C during cleanup is only noted
                steps.append("cleaned")
    assert steps == ["cleaned"]


def test_previous_handlers_come_back() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with SignalGuard().installed():
        assert signal.getsignal(signal.SIGTERM) != before[signal.SIGTERM]
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_signal_stops_every_worker_where_it_is_and_lets_each_clean_up() -> None:
    """Several AMIs at once: the handler runs in the main thread; each armed worker gets the same
    exception in its poll loop (no checkpoint there), and its cleanup runs to its end, a second
    signal sent from inside it notwithstanding."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    guard = SignalGuard()
    started = threading.Barrier(3)
    cleaned: list[str] = []

    def work(name: str) -> None:
        with guard.worker():
            try:
                started.wait()
                deadline = time.monotonic() + 10  # not reached: a test that fails rather than hangs
                while time.monotonic() < deadline:
                    time.sleep(0.05)  # a poll loop that never calls checkpoint()
            finally:
                with guard.cleanup():
                    if name == "a":
                        _signal_self(signal.SIGINT)  # only noted: the cleanup goes on
                    time.sleep(0.2)
                    cleaned.append(name)

    pool = ThreadPoolExecutor(max_workers=2)
    with pytest.raises(Interrupted, match="interrupted by SIGTERM"), guard.installed():
        futures = [pool.submit(work, name) for name in "ab"]
        started.wait()
        try:
            _signal_self(signal.SIGTERM)
        finally:
            with guard.cleanup():
                pool.shutdown(wait=True)
    assert sorted(cleaned) == ["a", "b"]
    assert all(isinstance(f.exception(), _Signalled) for f in futures)  # each stopped by the signal


def test_a_worker_inside_the_sdk_gets_the_signal_as_its_call_returns() -> None:
    """Issue 37 item 10: under --parallel a Ctrl-C must not raise inside botocore (a pool lock held,
    a credential refresh half done). A worker inside sdk_call() finishes the call; the signal is
    raised the moment it returns, and its cleanup then runs."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from imagelint.aws.signals import sdk_call

    guard = SignalGuard()
    inside, handled = threading.Event(), threading.Event()
    steps: list[str] = []

    def work() -> None:
        with guard.worker():
            try:
                with sdk_call():
                    inside.set()
                    # the signal comes in here (the call lasts until the handler has run, however
                    # loaded the machine): the "call" goes on to its end
                    assert handled.wait(60)
                    steps.append("call completed")
                steps.append("went on after the call")
            finally:
                with guard.cleanup():
                    steps.append("cleaned")

    pool = ThreadPoolExecutor(max_workers=1)
    with pytest.raises(Interrupted, match="SIGINT"), guard.installed():
        future = pool.submit(work)
        assert inside.wait(60)
        try:
            _signal_self(signal.SIGINT)
        finally:
            handled.set()  # the handler ran in this thread: it raised here
            with guard.cleanup():
                pool.shutdown(wait=True)
    assert steps == ["call completed", "cleaned"]
    assert isinstance(future.exception(), _Signalled)


def test_the_main_thread_inside_the_sdk_gets_the_signal_as_its_call_returns() -> None:
    from imagelint.aws.signals import sdk_call

    guard = SignalGuard()
    steps: list[str] = []
    with pytest.raises(Interrupted, match="SIGTERM"), guard.installed():
        with sdk_call():
            _signal_self(signal.SIGTERM)
            steps.append("call completed")
        steps.append("went on after the call")
    assert steps == ["call completed"]


def test_every_aws_call_runs_inside_sdk_call() -> None:
    """The one door to botocore (errors.converted, which call() and paginate() use) and the EBS
    reader's own retry loop hold signals: checked by where sdk_call is entered."""
    import inspect

    from imagelint.aws import ebs_api, errors

    assert "with sdk_call():" in inspect.getsource(errors.converted)
    assert "sdk_call()" in inspect.getsource(ebs_api.EbsApi._call)
