"""Cleanup steps run in isolation: each one runs whatever became of the steps before it.

A run's cleanup (terminate the instances and wait for them, delete the volumes, the security group,
the role and instance profile) and ``imagelint ami cleanup`` go through :meth:`Teardown.step`. A step
that AWS throttles is run again with jittered exponential backoff, within ``budget`` seconds (the
steps are idempotent: terminating a terminated instance or deleting what is gone is no error); a
step that still fails is logged as a warning, its error kept, and the next step runs. The failures
are reported apart from the audit's verdict (:func:`imagelint.report.verdict.with_leftovers` turns a
pass into exit 3: a paid resource that may be left must not go unnoticed).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import field

from imagelint.aws.errors import THROTTLED, AwsError
from imagelint.errors import ExitCode, ImageLintError
from imagelint.records import dataclass

STEP_BUDGET = 300.0  # seconds one step may spend riding out throttling


@dataclass
class Teardown:
    """The cleanup of one run (thread-safe enough for the workers of ``--parallel``: each step's
    failure is one list append)."""

    log: Callable[[str], None]
    first: float = 1.0  # seconds: the first wait after a throttled step (it doubles, to ``cap``)
    cap: float = 20.0
    budget: float = STEP_BUDGET
    failures: list[str] = field(default_factory=list)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def step(self, what: str, func: Callable[[], object]) -> bool:
        """Run ``func`` (one cleanup step, idempotent); True when it succeeded."""
        deadline = time.monotonic() + self.budget
        wait = self.first
        while True:
            try:
                func()
                return True
            except AwsError as exc:
                if exc.code in THROTTLED and time.monotonic() + wait < deadline:
                    self.sleep(random.uniform(wait / 2, wait))
                    wait = min(self.cap, wait * 2)
                    continue
                return self._failed(what, exc)
            except ImageLintError as exc:
                return self._failed(what, exc)

    def _failed(self, what: str, exc: Exception) -> bool:
        line = f"{what}: {exc}"
        self.failures.append(line)
        self.log(f"warning: cleanup step failed (the next steps still run): {line}")
        return False


class CleanupError(ImageLintError):
    """A cleanup step failed: something may be left (exit 3)."""

    exit_code = ExitCode.INCONCLUSIVE

    def __init__(self, failures: list[str]) -> None:
        super().__init__(leftovers_line(failures))


def leftovers_line(failures: list[str]) -> str:
    """The one line that says a cleanup failed and what to do."""
    more = f" (and {len(failures) - 1} more step(s))" if len(failures) > 1 else ""
    return (
        f"cleanup failed, resources of the run may be left (and cost): {failures[0]}{more}; "
        "`imagelint ami cleanup` removes them later"
    )
