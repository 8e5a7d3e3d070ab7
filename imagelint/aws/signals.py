"""SIGINT and SIGTERM during an AWS run: stop, clean up what the run created, exit 3.

:class:`SignalGuard` turns either signal into :class:`Interrupted` (exit 3, inconclusive) while armed;
cleanup blocks run to their end whatever arrives meanwhile. `imagelint ami` terminates its instances
and volumes on the way out; `imagelint fleet` cancels its SSM command.
"""

from __future__ import annotations

import contextlib
import signal
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
        self.armed = True
        self.received: int | None = None

    def _handler(self, signum: int, frame: object) -> None:
        if self.received is None:
            self.received = signum
        if self.armed:
            raise _Signalled(signum)

    def checkpoint(self) -> None:
        if self.armed and self.received is not None:
            raise _Signalled(self.received)

    @contextlib.contextmanager
    def installed(self) -> Iterator[SignalGuard]:
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        for s in old:
            signal.signal(s, self._handler)
        try:
            yield self
        except _Signalled as signalled:
            name = signal.Signals(signalled.signum).name
            raise Interrupted(f"interrupted by {name}; cleaned up what this run created") from None
        finally:
            for s, h in old.items():
                signal.signal(s, h)

    @contextlib.contextmanager
    def cleanup(self) -> Iterator[None]:
        """Cleanup must finish: a second Ctrl-C or SIGTERM does not cut it short."""
        was = self.armed
        self.armed = False
        try:
            yield
        finally:
            self.armed = was
        self.checkpoint()  # reached only when the block ended normally: a signal noted in it stops the run
