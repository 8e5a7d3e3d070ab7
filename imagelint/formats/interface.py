"""The one interface every output format implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from imagelint.report import Report


@dataclass(frozen=True)
class RenderOptions:
    """Settings a format may use. ``color`` is only ever true for a terminal."""

    color: bool = False
    show_waived: bool = False
    sarif_anchor: str | None = None  # a repository file to anchor SARIF results to (code scanning needs one)


class Formatter(Protocol):
    name: str

    def render(self, report: Report, options: RenderOptions) -> str:
        """The whole output for this report."""
        ...
