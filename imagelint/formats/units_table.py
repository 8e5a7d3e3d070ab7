"""The ``units`` document as a text table: one row per unit (colour only when asked), then the problems.

Off a terminal (a pipe, a CI log) the table is written directly: columns as wide as
their widest cell, two spaces apart, trailing spaces trimmed, which is the layout rich gives with
these settings, without a layout engine per cell. Rich lays out the coloured table for a terminal,
and any table wider than ``PLAIN_WIDTH`` (rich folds its cells).
"""

from __future__ import annotations

import io
import os
import re
import unicodedata
from functools import lru_cache
from typing import Any

PLAIN_WIDTH = 400
COLUMNS = ("unit", "state", "preset", "file", "drop-ins", "boot chain")

ARROW = " → "

_STATE_STYLE = {
    "enabled": "green",
    "enabled-runtime": "green",
    "masked": "red",
    "masked-runtime": "red",
    "bad": "bold red",
    "disabled": "dim",
}


def render_text(document: dict[str, Any], *, terminal: bool, color: bool | None = None) -> str:
    """A table of the units, then the problems: laid out for the terminal's width when ``terminal``
    (coloured unless ``color`` is false), else the plain layout."""
    color = terminal if color is None else color and terminal
    if not terminal:
        plain = _plain(document)
        if plain is not None:
            return plain
    from rich.console import Console
    from rich.markup import escape as markup
    from rich.table import Table

    def escape(text: str) -> str:
        return markup(text)

    buffer = io.StringIO()
    width = _width() if terminal else PLAIN_WIDTH
    console = Console(
        file=buffer, force_terminal=terminal, no_color=not color, width=width, highlight=False, emoji=False
    )
    units = document["units"]
    console.print(escape(_heading(document)))
    table = Table(show_lines=False, expand=False, pad_edge=False, box=None, header_style="bold")
    for column in COLUMNS:
        table.add_column(column, overflow="fold")
    for u, cells in zip(units, _rows(document), strict=True):
        style = _STATE_STYLE.get(u["state"])
        escaped = [markup(cell) for cell in cells]
        if style:
            escaped[1] = f"[{style}]{escaped[1]}[/]"
        table.add_row(*escaped)
    console.print(table)
    for where, message in _problems(document):
        console.print(f"[yellow]problem[/] {markup(where)}: {markup(message)}")
    text = buffer.getvalue()
    return text if color else "\n".join(line.rstrip() for line in text.split("\n"))


def _width() -> int:
    try:
        return max(80, os.get_terminal_size().columns)
    except OSError:
        return 160


def _heading(document: dict[str, Any]) -> str:
    from imagelint.report.escape import for_log

    units = document["units"]
    boot = sum(1 for u in units if u["boot_chain"])
    assumed = ", assumed: the image has no default.target" if document.get("default_target_assumed") else ""
    return (
        f"{for_log(document['root'])}: {len(units)} units, {boot} started at boot "
        f"(default.target → {for_log(document['default_target'] or 'none')}{assumed})"
    )


def _rows(document: dict[str, Any]) -> list[list[str]]:
    """Each unit's cells, escaped for a terminal or a log."""
    from imagelint.report.escape import for_log

    rows = []
    for u in document["units"]:
        source = u["fragment"] or u["path"] or ""
        if u["unit"] and u["unit"] != u["name"]:
            source = f"→ {u['unit']} ({source})"
        chain = ARROW.join(u["boot_chain"]) if u["boot_chain"] else ""
        cells = (u["name"], u["state"], u["preset"] or "", source, ", ".join(u["dropins"]), chain)
        rows.append([for_log(cell) for cell in cells])
    return rows


def _problems(document: dict[str, Any]) -> list[tuple[str, str]]:
    from imagelint.report.escape import for_log

    out = []
    for p in document["problems"]:
        where = p["path"] if p["line"] is None else f"{p['path']}:{p['line']}"
        out.append((for_log(where), for_log(p["message"])))
    return out


def _cells(text: str) -> int:
    """Terminal columns ``text`` takes (wide East Asian characters 2, combining marks 0)."""
    if text.isascii():
        return len(text)
    rest = _ASCII_RUNS.sub("", text)  # every ASCII character takes one column
    return len(text) - len(rest) + sum(map(_char_cells, rest))


_ASCII_RUNS = re.compile("[\x00-\x7f]+")


@lru_cache(maxsize=1024)  # the few non-ASCII characters of a table (the chain arrow) are asked again
def _char_cells(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def _plain(document: dict[str, Any]) -> str | None:
    """The table written directly; None when a line would be wider than ``PLAIN_WIDTH`` (rich folds)."""
    rows = [list(COLUMNS), *_rows(document)]
    sizes = [[_cells(cell) for cell in row] for row in rows]  # each cell measured once
    widths = [max(column) for column in zip(*sizes, strict=True)]
    heading = _heading(document)
    problems = [f"problem {where}: {message}" for where, message in _problems(document)]
    too_wide = sum(widths) + 2 * (len(widths) - 1) > PLAIN_WIDTH
    if too_wide or any(_cells(line) > PLAIN_WIDTH for line in (heading, *problems)):
        return None
    out = [heading]
    for row, row_sizes in zip(rows, sizes, strict=True):
        padded = [cell + " " * (w - n) for cell, n, w in zip(row, row_sizes, widths, strict=True)]
        out.append("  ".join(padded).rstrip())
    return "\n".join([*out, *problems, ""])
