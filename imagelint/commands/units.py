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

from dataclasses import replace
from typing import TYPE_CHECKING

from imagelint.errors import UsageError
from imagelint.facts.systemd import UnitIndex
from imagelint.formats import RenderOptions
from imagelint.formats.interface import UNITS, UnitsListing
from imagelint.formats.outputs import OutputSpec, write_outputs
from imagelint.openers import OpenOptions, open_spec

if TYPE_CHECKING:
    from imagelint.collector.plan import Plan


def listing_of(spec: str, opening: OpenOptions | None = None) -> UnitsListing:
    """The units of the image ``spec`` names (any kind :mod:`imagelint.openers` opens; a host over
    ssh gathers what the unit index reads)."""
    opening = opening or OpenOptions()
    if opening.plan is None:
        opening = replace(opening, plan=_units_plan)
    with open_spec(spec, opening) as opened:
        if opened.target is None:
            raise UsageError(f"a {opened.kind} has no units to list", where=spec)
        return UnitsListing(spec, UnitIndex.build(opened.target))


def _units_plan() -> Plan:
    from imagelint.collector.plan import units_plan  # the rule registry: only for a host over ssh

    return units_plan()


def run_units(spec: str, formats: list[str], opening: OpenOptions | None = None) -> int:
    """List the units of the image ``spec`` names to every ``-f FORMAT[:PATH]``."""
    outputs = OutputSpec.parse_all(formats, UNITS)  # bad usage refused before the image is read
    write_outputs(listing_of(spec, opening), outputs, RenderOptions(), UNITS)
    return 0
