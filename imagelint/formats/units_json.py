"""The ``units`` document as JSON: its published schema (``imagelint schema units``) and a writer
that streams it one unit at a time, so the whole document is never held in memory."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TextIO

from imagelint.report.escape import json_text

if TYPE_CHECKING:
    from imagelint.formats.interface import UnitsListing

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


def units_document(listing: UnitsListing) -> dict[str, Any]:
    """The JSON document of ``imagelint units`` (see UNITS_SCHEMA), whole."""
    return {"root": str(listing.root), **listing.index.to_dict()}


def write_units_json(listing: UnitsListing, out: TextIO) -> None:
    """Write ``json_text(units_document(listing), indent=1)`` and a newline, the same text, one unit
    at a time: the whole document is never held in memory."""
    index = listing.index
    head: dict[str, Any] = {
        "root": str(listing.root),
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
