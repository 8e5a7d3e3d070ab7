"""The one interface every output format implements."""

from __future__ import annotations

from typing import Protocol

from imagelint.report import Report


class Formatter(Protocol):
    name: str

    def render(self, report: Report, *, color: bool, show_waived: bool) -> str:
        """The whole output for this report. ``color`` is only ever true for a terminal."""
        ...
