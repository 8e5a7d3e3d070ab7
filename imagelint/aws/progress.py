"""Progress of a long AWS run on stderr: a spinner with phase and elapsed time on a terminal, plain
timestamped lines in CI logs (one per phase change, and a line at most every ``every`` seconds
while a phase waits). :meth:`Progress.labelled` gives one image of several checked at once its own
phase and lines, each prefixed with its label (``us-east-1:ami-…: launching``), on the same stream."""

from __future__ import annotations

import copy
import time
from datetime import UTC, datetime
from typing import Any

from imagelint import stderr
from imagelint.report.escape import for_log


class Progress:
    def __init__(self, *, interactive: bool, every: float = 30.0) -> None:
        self.interactive = interactive
        self.every = every
        self.started = time.monotonic()
        self.phase_started = self.started
        self.phase_name = ""
        self._last_line = 0.0
        self._status: Any = None
        self.label = ""

    def labelled(self, label: str) -> Progress:
        """A view for one image: its own phase and timer, its label on every line, the same output."""
        view = copy.copy(self)
        view.label = f"{self.label}{label}: "
        view.phase_name, view.phase_started, view._last_line = "", time.monotonic(), 0.0
        return view

    def __enter__(self) -> Progress:
        if self.interactive:
            from rich.console import Console

            self._status = Console(stderr=True).status("starting")
            self._status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def phase(self, name: str, detail: str = "") -> None:
        self.phase_name = name
        self.phase_started = time.monotonic()
        self._show(detail, force=True)

    def update(self, detail: str) -> None:
        self._show(detail, force=False)

    def log(self, message: str) -> None:
        """A line that stays (results, cleanup actions)."""
        safe = for_log(self.label + message)  # it may quote the instance (its console, a command's output)
        if self._status is not None:
            from rich.text import Text

            self._status.console.print(Text(safe))
        else:
            stderr.line(f"{self._stamp()} {safe}")

    def _stamp(self) -> str:
        return f"[{datetime.now(UTC):%H:%M:%S}] +{time.monotonic() - self.started:6.1f}s"

    def _show(self, detail: str, *, force: bool) -> None:
        in_phase = time.monotonic() - self.phase_started
        detail = for_log(detail)
        text = f"{self.label}{self.phase_name} ({in_phase:.0f}s)" + (f" · {detail}" if detail else "")
        if self._status is not None:
            from rich.text import Text

            self._status.update(Text(text))
            return
        now = time.monotonic()
        if force or now - self._last_line >= self.every:
            self._last_line = now
            stderr.line(f"{self._stamp()} {self.label}{self.phase_name}" + (f": {detail}" if detail else ""))
