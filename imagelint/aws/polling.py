"""The pace of a poll loop that rides out throttling.

A poll asks AWS the same question until the answer changes or a deadline passes (is the instance
running, has the command ended, is the volume attached). botocore's adaptive retries absorb short
bursts of throttling; when a throttle outlasts them, the question is simply not answered *this
time*: the loop waits longer (twice the last wait, up to :data:`CAP`) and asks again, within its own
deadline. Only other errors end the loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import field
from typing import Any, TypeVar

from imagelint.aws.errors import THROTTLED, AwsError
from imagelint.records import dataclass

T = TypeVar("T")
CAP = 60.0  # seconds between two looks at most, however long AWS throttles


@dataclass
class Pace:
    """``every`` seconds between looks; longer after a look AWS throttled."""

    every: float
    throttled: int = 0  # looks AWS throttled past botocore's retries
    _wait: float = 0.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def look(self, ask: Callable[..., T], /, *args: Any, **kwargs: Any) -> T | None:
        """``ask(*args, **kwargs)``'s answer, or None when AWS throttled it (``ask`` must not answer
        None)."""
        try:
            answer = ask(*args, **kwargs)
        except AwsError as exc:
            if exc.code not in THROTTLED:
                raise
            self.throttled += 1
            self._wait = min(CAP, max(self._wait, self.every) * 2)
            return None
        self._wait = self.every
        return answer

    def pause(self) -> None:
        """Wait before the next look."""
        self.sleep(self._wait or self.every)

    @property
    def note(self) -> str:
        """What to add to a timeout's message when throttling slowed the loop ('' when it did not)."""
        return f" ({self.throttled} look(s) throttled)" if self.throttled else ""
