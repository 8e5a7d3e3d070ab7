"""What several formats show the same way: a finding's level, its place in the image, the SARIF anchor,
and text made safe for a Markdown cell.

Levels follow the gate (:func:`imagelint.report.verdict.finding_fails`, the one place fail-on and
``always-fail`` are read): ``error`` for what fails the gate, ``warning`` below it, ``note`` for
``info``. A waived finding keeps the level it would have had.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from imagelint.report import Finding, Report
from imagelint.report.escape import for_markdown
from imagelint.report.verdict import finding_fails
from imagelint.rulepacks import Severity


def severity_level(severity: Severity, fail_on: Severity, tags: list[str] | tuple[str, ...] = ()) -> str:
    """The level of a rule's findings: ``error`` when they fail the gate, else ``warning``/``note``."""
    if finding_fails(severity, fail_on, tags):
        return "error"
    return "note" if severity is Severity.INFO else "warning"


def finding_level(finding: Finding, fail_on: Severity) -> str:
    """The level of one finding, from the ``failing`` mark the engine set (waived: as if not waived)."""
    if finding.failing:
        return "error"
    if finding.waiver is None:
        return "note" if finding.severity is Severity.INFO else "warning"
    return severity_level(finding.severity, fail_on)


def gate_words(finding: Finding) -> str:
    """What one finding does to the gate, in words: ``fails``, ``part of IL206`` or ``below fail-on``."""
    if finding.failing:
        return "fails"
    return f"part of {finding.part_of}" if finding.part_of else "below fail-on"


def location_text(finding: Finding) -> str:
    """Where in the image, for humans: ``unit X (/path:line)`` or ``/path:line``."""
    where = finding.location
    if finding.unit and finding.unit not in where:
        return f"unit {finding.unit} ({where})" if where else f"unit {finding.unit}"
    return where


def source_root() -> Path:
    """``%SRCROOT%``: ``$GITHUB_WORKSPACE``, else the working directory."""
    return Path(os.environ.get("GITHUB_WORKSPACE") or os.getcwd()).resolve()


def anchor_uri(anchor: str | None, report: Report) -> str | None:
    """The repository-relative URI results are anchored to, or None (see ``formats/sarif.py``)."""
    root = source_root()
    if anchor:
        path = Path(os.path.abspath(anchor))  # a relative anchor is relative to the working directory
        return _relative(path, root) or path.as_uri()
    config = (report.config or {}).get("path")
    return _relative(Path(config), root) if config else None


def _relative(path: Path, root: Path) -> str | None:
    try:
        return PurePosixPath(path.resolve().relative_to(root)).as_posix()
    except ValueError:
        return None


def one_line(text: str) -> str:
    """A rule's prose on one line: its white space collapsed (a YAML block scalar's line breaks and
    final newline are layout, not content)."""
    return " ".join(text.split())


def cell(text: object) -> str:
    """Text made safe for a Markdown table cell or list item (GitHub renders HTML inside tables)."""
    return for_markdown(str(text).strip())


def inline(text: object) -> str:
    """Text made safe for Markdown in the middle of a line, where no block construct can start: as
    :func:`cell`, but a leading digit or sign stays as it is (``0.1.0``, not ``&#48;.1.0``)."""
    return for_markdown(str(text).strip(), line_start=False)


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def prose(text: object) -> str:
    """A rule's own prose (a remediation) for a Markdown cell: as :func:`cell`, but its `code` spans
    shown as code (``<code>``, their text escaped as a cell's), not as literal backticks."""
    parts = _CODE_SPAN.split(str(text).strip())
    out = []
    for index, part in enumerate(parts):
        first = index == 0
        if index % 2:
            out.append(f"<code>{for_markdown(part, line_start=False)}</code>")
        elif part:
            out.append(for_markdown(part, line_start=first))
    return "".join(out)


def code(text: object) -> str:
    """Text as inline code in a Markdown table cell."""
    return f"<code>{cell(text)}</code>"
