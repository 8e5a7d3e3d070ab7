"""The systemd fact layer: unit files, enablement, presets and boot reachability of an image.

Entry point: ``UnitIndex.build(target)``. Everything is computed from the image's files the way
``systemctl --root=IMAGE`` and the service manager would; see the modules for the rules followed.
"""

from __future__ import annotations

from imagelint.facts.systemd.index import LoadedUnit, Unit, UnitIndex
from imagelint.facts.systemd.model import Assignment, ParsedFile, Problem
from imagelint.facts.systemd.parser import parse_unit_bytes, split_words
from imagelint.facts.systemd.presets import Presets

__all__ = [
    "Assignment",
    "LoadedUnit",
    "ParsedFile",
    "Presets",
    "Problem",
    "Unit",
    "UnitIndex",
    "parse_unit_bytes",
    "split_words",
]
