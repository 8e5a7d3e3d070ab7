"""The ``units`` document as a text table: one row per unit (colour only when asked), then the problems."""

from __future__ import annotations

import io
import os
from typing import Any

ARROW = " → "

_STATE_STYLE = {
    "enabled": "green",
    "enabled-runtime": "green",
    "masked": "red",
    "masked-runtime": "red",
    "bad": "bold red",
    "disabled": "dim",
}


def render_text(document: dict[str, Any], *, color: bool) -> str:
    """A table of the units (colour only when asked), then the problems."""
    from rich.console import Console
    from rich.markup import escape as markup
    from rich.table import Table

    from imagelint.report.escape import for_log

    def escape(text: str) -> str:
        return markup(for_log(text))

    buffer = io.StringIO()
    width = _width() if color else 400
    console = Console(file=buffer, force_terminal=color, no_color=not color, width=width, highlight=False)
    units = document["units"]
    boot = sum(1 for u in units if u["boot_chain"])
    assumed = ", assumed: the image has no default.target" if document.get("default_target_assumed") else ""
    console.print(
        f"{escape(document['root'])}: {len(units)} units, {boot} started at boot "
        f"(default.target → {escape(document['default_target'] or 'none')}{assumed})"
    )
    table = Table(show_lines=False, expand=False, pad_edge=False, box=None, header_style="bold")
    for column in ("unit", "state", "preset", "file", "drop-ins", "boot chain"):
        table.add_column(column, overflow="fold")
    for u in units:
        style = _STATE_STYLE.get(u["state"])
        state = f"[{style}]{escape(u['state'])}[/]" if style else escape(u["state"])
        source = u["fragment"] or u["path"] or ""
        if u["unit"] and u["unit"] != u["name"]:
            source = f"→ {u['unit']} ({source})"
        chain = ARROW.join(u["boot_chain"]) if u["boot_chain"] else ""
        table.add_row(
            escape(u["name"]),
            state,
            escape(u["preset"] or ""),
            escape(source),
            escape(", ".join(u["dropins"])),
            escape(chain),
        )
    console.print(table)
    for p in document["problems"]:
        where = p["path"] if p["line"] is None else f"{p['path']}:{p['line']}"
        console.print(f"[yellow]problem[/] {escape(where)}: {escape(p['message'])}")
    text = buffer.getvalue()
    return text if color else "\n".join(line.rstrip() for line in text.split("\n"))


def _width() -> int:
    try:
        return max(80, os.get_terminal_size().columns)
    except OSError:
        return 160
