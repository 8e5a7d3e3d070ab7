"""``imagelint units [ROOT] [-f text|json[:PATH]]``: every unit of an image, as the index sees it.

For each unit name (those ``systemctl --root=ROOT list-unit-files`` lists, plus instances that
``.wants/`` links name and units reached at boot): enablement state, preset verdict, the search-path
entry and the unit file it loads, drop-ins, aliases, and for units started at boot the chain from
``default.target``. Problems (unreadable files, link loops...) follow the table, one per line, and
are in the JSON. This path imports neither the rule engine nor jsonschema: it is meant to be as
quick as ``systemctl list-unit-files``.

Exit codes: 0 listed (problems are listed too, they are facts about the image); 2 bad usage (no
such root, unknown format).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from imagelint.errors import UsageError
from imagelint.report.escape import json_text

if TYPE_CHECKING:
    from imagelint.facts.systemd import UnitIndex
    from imagelint.openers import OpenOptions
    from imagelint.targets.interface import Target

ARROW = " → "

_NULLABLE_STR = {"type": ["string", "null"]}
UNITS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://imagelint.dev/schemas/units.json",
    "title": "imagelint units --format json",
    "type": "object",
    "required": ["root", "search_path", "default_target", "default_target_assumed", "units", "problems"],
    "additionalProperties": False,
    "properties": {
        "root": {"type": "string", "description": "the image root on the host"},
        "search_path": {"type": "array", "items": {"type": "string"}, "description": "unit search path"},
        "default_target": {**_NULLABLE_STR, "description": "the unit default.target loads, if any"},
        "default_target_assumed": {
            "type": "boolean",
            "description": "the tree has no default.target (a partial tree): multi-user.target is assumed",
        },
        "units": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "name",
                    "state",
                    "preset",
                    "path",
                    "unit",
                    "fragment",
                    "dropins",
                    "aliases",
                    "masked",
                    "load",
                    "boot_chain",
                ],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string"},
                    "state": {
                        "type": "string",
                        "description": "as systemctl is-enabled: enabled, static, disabled, alias, masked...",
                    },
                    "preset": {
                        "enum": ["enabled", "disabled", "-"],
                        "description": "as systemctl list-unit-files: '-' for static units and aliases",
                    },
                    "path": {**_NULLABLE_STR, "description": "the search-path entry of this name"},
                    "unit": {
                        **_NULLABLE_STR,
                        "description": "the unit the name loads (differs for an alias)",
                    },
                    "fragment": {**_NULLABLE_STR, "description": "the unit file loaded"},
                    "dropins": {"type": "array", "items": {"type": "string"}},
                    "aliases": {"type": "array", "items": {"type": "string"}},
                    "masked": {"type": "boolean"},
                    "load": {
                        "enum": ["loaded", "masked", "not-found", "error", "unread", None],
                        "description": "how the unit file loads",
                    },
                    "boot_chain": {
                        "type": ["array", "null"],
                        "items": {"type": "string"},
                        "description": "default.target → … → the unit, when it is started at boot",
                    },
                },
            },
        },
        "problems": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["path", "line", "message"],
                "additionalProperties": False,
                "properties": {
                    "path": {"type": "string"},
                    "line": {"type": ["integer", "null"]},
                    "message": {"type": "string"},
                },
            },
        },
    },
}


def build_index(root: Path, *, partition: int | None = None, target: Target | None = None) -> UnitIndex:
    """The unit index of the image at ``root`` (a directory or a disk image file; or the ``target``
    already opened, e.g. an EBS snapshot); UsageError if neither."""
    from imagelint.facts.systemd import UnitIndex
    from imagelint.targets.select import open_target

    if target is not None:
        return UnitIndex.build(target)
    if not root.is_dir() and not root.is_file():
        raise UsageError(f"{root}: not a directory (give the root of a mounted image) or a disk image")
    return UnitIndex.build(open_target(root, partition=partition))


def units_document(
    root: Path, *, partition: int | None = None, target: Target | None = None
) -> dict[str, Any]:
    """The JSON document of ``imagelint units`` (see UNITS_SCHEMA)."""
    return {"root": str(root), **build_index(root, partition=partition, target=target).to_dict()}


def write_units_json(root: Path, index: UnitIndex, out: TextIO) -> None:
    """Write ``json_text(units_document(root), indent=1)`` and a newline, the same text, one unit at
    a time: the whole document is never held in memory."""
    head: dict[str, Any] = {
        "root": str(root),
        "search_path": list(index.search_path),
        "default_target": index.default_target,
        "default_target_assumed": index.default_target_assumed,
    }
    out.write("{")
    for key, value in head.items():
        out.write(f"\n {_dump(key)}: {_indented(_dump(value), 1)},")
    out.write(f"\n {_dump('units')}: ")
    _write_array(out, (index.units[name].to_dict() for name in sorted(index.units)))
    out.write(f",\n {_dump('problems')}: ")
    _write_array(out, (p.to_dict() for p in index.problems))
    out.write("\n}\n")


def _dump(value: object) -> str:
    # every string from the image made encodable and safe for a terminal (report/escape.py)
    return json_text(value, indent=1)


def _indented(text: str, level: int) -> str:
    # JSON text has no raw newline inside a string: every newline is json's own indentation
    return text.replace("\n", "\n" + " " * level)


def _write_array(out: TextIO, items: Iterable[object]) -> None:
    """An array at nesting level 1 of an ``indent=1`` document."""
    first = True
    for item in items:
        out.write("[\n  " if first else ",\n  ")
        out.write(_indented(_dump(item), 2))
        first = False
    out.write("[]" if first else "\n ]")


@dataclass(frozen=True)
class UnitsListing:
    """The units document of one image, as the text and json formats render it."""

    root: Path
    index: UnitIndex

    def text(self, *, color: bool) -> str:
        return render_text({"root": str(self.root), **self.index.to_dict()}, color=color)

    def json(self) -> str:
        out = io.StringIO()
        write_units_json(self.root, self.index, out)
        return out.getvalue()


def run_units(spec: str, formats: list[str], opening: OpenOptions | None = None) -> int:
    """List the units of the image ``spec`` names (any kind :mod:`imagelint.openers` opens) to every
    ``-f FORMAT[:PATH]``."""
    from imagelint.facts.systemd import UnitIndex
    from imagelint.formats import RenderOptions
    from imagelint.formats.interface import UNITS
    from imagelint.openers import open_spec
    from imagelint.session import OutputSpec, write_outputs

    outputs = OutputSpec.parse_all(formats, UNITS)  # bad usage refused before the image is read
    with open_spec(spec, opening) as opened:
        if opened.target is None:
            raise UsageError(f"a {opened.kind} has no units to list", where=spec)
        listing = UnitsListing(Path(spec), UnitIndex.build(opened.target))
        write_outputs(listing, outputs, RenderOptions(), UNITS)
    return 0


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
