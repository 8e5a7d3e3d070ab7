"""Parameter schemas that several check kinds share, and the selection they describe.

:func:`flag` and :func:`strings` are the schemas of a boolean and of a list of strings. ``UNITS`` is
the ``units`` / ``exclude_units`` pair of unit-name globs; :func:`name_selected` applies it to a
plain unit name (journal records, the live manager's units). Kinds on the unit index match aliases
and templates too (:func:`imagelint.facts.systemd.enablement.unit_matches`).
"""

from __future__ import annotations

import fnmatch
from typing import Any


def flag(description: str = "", *, default: bool = False) -> dict[str, Any]:
    """The schema of a boolean parameter."""
    schema: dict[str, Any] = {"type": "boolean", "default": default}
    if description:
        schema["description"] = description
    return schema


def strings(description: str = "", **extra: Any) -> dict[str, Any]:
    """The schema of a list of strings (globs, names, values), with further keywords (minItems…)."""
    schema: dict[str, Any] = {"type": "array", "items": {"type": "string"}, **extra}
    if description:
        schema["description"] = description
    return schema


UNITS: dict[str, Any] = {
    "units": strings("unit name globs to consider (on unit files, aliases match too); default all"),
    "exclude_units": strings("unit globs to leave out"),
}


def name_selected(name: str, params: dict[str, Any]) -> bool:
    """Whether a unit name passes the ``units`` and ``exclude_units`` globs of ``params``."""
    include = params.get("units")
    if include and not any(fnmatch.fnmatchcase(name, g) for g in include):
        return False
    return not any(fnmatch.fnmatchcase(name, g) for g in params.get("exclude_units", ()))
