"""The one interface every output format implements.

A format renders one or more *documents*: the audit ``report`` (every format), a ``diff`` result,
a ``units`` listing. It names them in ``documents``; for each document other than the report it has
a ``render_<document>`` method. Every command writes its document through the same ``-f
FORMAT[:PATH]`` (:func:`imagelint.formats.check_format`, :func:`imagelint.formats.render`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from imagelint.records import dataclass
from imagelint.report import Report

if TYPE_CHECKING:
    from imagelint.facts.systemd import UnitIndex


@dataclass(frozen=True)
class RenderOptions:
    """Settings a format may use. ``terminal``: stdout is a terminal, so the layouts made for one
    (a table) are used; their colour is off under ``NO_COLOR`` (:func:`colour`), the layout is not."""

    terminal: bool = False
    show_waived: bool = False
    sarif_anchor: str | None = None  # a repository file to anchor SARIF results to (code scanning needs one)


REPORT, DIFF, UNITS = "report", "diff", "units"


def colour(options: RenderOptions) -> bool:
    """Colour on a terminal, unless the user set ``NO_COLOR`` (https://no-color.org)."""
    return options.terminal and "NO_COLOR" not in os.environ


@dataclass(frozen=True)
class UnitsListing:
    """The ``units`` document: every unit of one image, as the index sees it."""

    root: str | Path  # what the command line named: a path, or a host (ssh://…)
    index: UnitIndex


class Formatter(Protocol):
    name: str
    documents: tuple[str, ...]  # what it renders: REPORT, and maybe DIFF, UNITS

    def render(self, report: Report, options: RenderOptions) -> str:
        """The whole output for this report."""
        ...
