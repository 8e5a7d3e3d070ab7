"""How many calls of one API may be in flight at once, lowered when AWS throttles and raised again
when it answers: additive increase, multiplicative decrease, as TCP's congestion window does.

The EBS direct APIs have per-account request quotas that several readers share (the AMIs of a
``--parallel`` run, other jobs of the account). A reader that keeps its 16 requests in flight while
AWS throttles spends them on throttled answers and their backoff; one that halves its window on
each throttled *round* and grows it by one per window of answers settles near the rate AWS grants.

A throttled answer halves the window once per round: the answers of calls that started before the
last cut do not cut again (16 calls throttled together cut once, not down to one).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class CallWindow:
    """At most :attr:`size` calls in flight (between 1 and ``ceiling``); thread-safe."""

    def __init__(self, ceiling: int) -> None:
        if ceiling < 1:
            raise ValueError("a call window holds at least one call")
        self.ceiling = ceiling
        self._size = float(ceiling)
        self._busy = 0
        self._round = 0  # bumped by every cut: calls started before it do not cut again
        self._changed = threading.Condition()
        self.lowest = ceiling  # the smallest window the run came down to
        self.cuts = 0

    @property
    def size(self) -> int:
        with self._changed:
            return int(self._size)

    @contextlib.contextmanager
    def slot(self) -> Iterator[int]:
        """Wait for room, hold it for one call; yields the round the call started in."""
        with self._changed:
            while self._busy >= int(self._size):
                self._changed.wait()
            self._busy += 1
            started = self._round
        try:
            yield started
        finally:
            with self._changed:
                self._busy -= 1
                self._changed.notify()

    def throttled(self, started: int) -> None:
        """A call that started in round ``started`` was throttled: halve the window (once a round)."""
        with self._changed:
            if started != self._round:
                return
            self._round += 1
            self._size = max(1.0, self._size / 2)
            self.cuts += 1
            self.lowest = min(self.lowest, int(self._size))

    def answered(self) -> None:
        """A call was answered: grow by one call per window of answers, up to the ceiling."""
        with self._changed:
            before = int(self._size)
            self._size = min(float(self.ceiling), self._size + 1 / self._size)
            if int(self._size) > before:
                self._changed.notify_all()
