"""SIGINT and SIGTERM during an AWS run: stop, clean up what the run created, exit 3.

:class:`SignalGuard` turns either signal into :class:`Interrupted` (exit 3, inconclusive) while armed;
cleanup blocks run to their end whatever arrives meanwhile. `imagelint ami` terminates its instances
and volumes on the way out; `imagelint fleet` cancels its SSM command.

Worker threads (``ami check`` of several AMIs at once) register with :meth:`SignalGuard.worker`. Python
runs signal handlers in the main thread only, so the handler raises the same exception in every
registered worker that is armed (not in a cleanup block), through CPython's
``PyThreadState_SetAsyncExc``: each stops where it is, at its next bytecode (after the sleep or call
in flight), and runs its own ``finally`` cleanup, exactly as the main thread does. Armed or not is
kept per thread, under one lock the handler takes too, so a worker's cleanup is never cut short.

No thread is interrupted *inside* the AWS SDK: every call into it runs in :func:`sdk_call`, and a
signal that arrives meanwhile is held for that thread and raised as the call returns. An exception
raised at an arbitrary bytecode of botocore or urllib3 could leave a connection pool's lock held or
a credential refresh half done, and the cleanup that follows uses the same clients.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import threading
from collections.abc import Iterator

from imagelint.errors import ExitCode, ImageLintError


class Interrupted(ImageLintError):
    exit_code = ExitCode.INCONCLUSIVE


class _Signalled(BaseException):
    """Raised by the handler. A BaseException, like KeyboardInterrupt, so that no library's
    ``except Exception`` (botocore has several on its request path) swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class SignalGuard:
    """SIGINT/SIGTERM raise :class:`Interrupted` while armed; during cleanup they are only noted,
    and a signal noted then stops the run once the cleanup is done. :meth:`checkpoint` raises
    again for a signal whose exception something on the way up swallowed: a signal is never lost."""

    def __init__(self) -> None:
        self.received: int | None = None
        # reentrant: the handler runs in the main thread, perhaps while that thread holds the lock
        self._lock = threading.RLock()
        self._armed: dict[int, bool] = {}  # by thread: armed unless in a cleanup block
        self._workers: set[int] = set()
        self._in_sdk: dict[int, int] = {}  # by thread: how deep in sdk_call blocks
        self._held: set[int] = set()  # threads a signal is held for until their SDK call returns

    @property
    def armed(self) -> bool:
        """Whether a signal raises in the calling thread now."""
        with self._lock:
            return self._armed.get(threading.get_ident(), True)

    @armed.setter
    def armed(self, value: bool) -> None:
        with self._lock:
            self._armed[threading.get_ident()] = value

    def _handler(self, signum: int, frame: object) -> None:
        if self.received is None:
            self.received = signum
        main = threading.get_ident()
        with self._lock:
            for ident in self._workers:
                if self._armed.get(ident, True):
                    if self._in_sdk.get(ident):
                        self._held.add(ident)
                    else:
                        _raise_in(ident, signum)
            if self._in_sdk.get(main):
                self._held.add(main)
                return
        if self.armed:
            raise _Signalled(signum)

    def _enter_sdk(self) -> None:
        ident = threading.get_ident()
        with self._lock:
            self._in_sdk[ident] = self._in_sdk.get(ident, 0) + 1

    def _leave_sdk(self) -> None:
        ident = threading.get_ident()
        with self._lock:
            depth = self._in_sdk.pop(ident, 1) - 1
            if depth:
                self._in_sdk[ident] = depth
                return
            held = ident in self._held
            self._held.discard(ident)
        if held:
            self.checkpoint()  # raises unless this thread is in a cleanup block by now

    def checkpoint(self) -> None:
        if self.armed and self.received is not None:
            raise _Signalled(self.received)

    @contextlib.contextmanager
    def worker(self) -> Iterator[None]:
        """The calling thread works for the run: a signal raises in it too (a signal that came before
        it started, at once)."""
        ident = threading.get_ident()
        with self._lock:
            self._workers.add(ident)
            self._armed[ident] = True
        try:
            self.checkpoint()
            yield
        finally:
            with self._lock:
                self._workers.discard(ident)
                self._armed.pop(ident, None)
                _raise_in(ident, None)  # nothing left pending for the pool's next task

    @contextlib.contextmanager
    def installed(self) -> Iterator[SignalGuard]:
        global _ACTIVE
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        for s in old:
            signal.signal(s, self._handler)
        outer, _ACTIVE = _ACTIVE, self
        try:
            yield self
        except _Signalled as signalled:
            name = signal.Signals(signalled.signum).name
            raise Interrupted(f"interrupted by {name}; cleaned up what this run created") from None
        finally:
            _ACTIVE = outer
            for s, h in old.items():
                signal.signal(s, h)

    @contextlib.contextmanager
    def cleanup(self) -> Iterator[None]:
        """Cleanup must finish: a second Ctrl-C or SIGTERM does not cut it short."""
        ident = threading.get_ident()
        with self._lock:
            was = self._armed.get(ident, True)
            self._armed[ident] = False
            if ident in self._workers:
                _raise_in(ident, None)  # raised by the handler, not delivered yet: noted instead
        try:
            yield
        finally:
            self.armed = was
        self.checkpoint()  # reached only when the block ended normally: a signal noted in it stops the run


_ACTIVE: SignalGuard | None = None  # the guard installed now (one run at a time in a process)


@contextlib.contextmanager
def sdk_call() -> Iterator[None]:
    """The calling thread is inside the AWS SDK: a signal is held until the block ends, then raised."""
    guard = _ACTIVE
    if guard is None:
        yield
        return
    guard._enter_sdk()
    try:
        yield
    finally:
        guard._leave_sdk()


def _raise_in(ident: int, signum: int | None) -> None:
    """Raise :class:`_Signalled` in another thread at its next bytecode (None: clear a pending one)."""
    exc: object = None
    if signum is not None:
        number = signum

        class _SignalledThere(_Signalled):
            def __init__(self) -> None:
                super().__init__(number)

        exc = ctypes.py_object(_SignalledThere)
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), exc)
