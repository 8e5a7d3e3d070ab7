"""What ``systemd-analyze verify`` would refuse in a unit, offline: a subset that needs no running manager.

Covered: sections the unit type does not know (systemd ignores their settings), services without a
required ``ExecStart=`` (or with several where only one is allowed), and hard dependencies
(``Requires=``, ``Requisite=``, ``BindsTo=``) on units no unit file defines. Units of the types that
come into being without a unit file (devices, fstab's mounts and swaps, slices, scopes) never count
as missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagelint.facts.systemd import names
from imagelint.facts.systemd.parser import split_words
from imagelint.facts.systemd.specifiers import SpecifierError, expand

if TYPE_CHECKING:
    from imagelint.facts.systemd.index import Unit, UnitIndex

KNOWN_SECTIONS = {
    "service": {"Unit", "Service", "Install"},
    "socket": {"Unit", "Socket", "Install"},
    "mount": {"Unit", "Mount", "Install"},
    "automount": {"Unit", "Automount", "Install"},
    "swap": {"Unit", "Swap", "Install"},
    "timer": {"Unit", "Timer", "Install"},
    "path": {"Unit", "Path", "Install"},
    "target": {"Unit", "Install"},
    "slice": {"Unit", "Slice", "Install"},
    "scope": {"Unit", "Scope", "Install"},
    "device": {"Unit", "Install"},
}
HARD_DEPS = ("Requires", "Requisite", "BindsTo")
# Units of these types come into being without a unit file (devices, fstab's generator, slices)
IMPLICIT_TYPES = ("device", "mount", "swap", "automount", "slice", "scope")

Problem = tuple[str | None, int | None, str]  # (file, line, what is wrong)


def unit_problems(index: UnitIndex, unit: Unit) -> list[Problem]:
    """Everything :mod:`verify` knows to be wrong with one loaded unit, each at its file and line."""
    unit_id = unit.unit_id or unit.name
    return [
        *_unknown_sections(unit, unit_id),
        *_exec_start(unit, unit_id),
        *_missing_deps(index, unit, unit_id),
    ]


def _unknown_sections(unit: Unit, unit_id: str) -> list[Problem]:
    known = KNOWN_SECTIONS.get(names.unit_type(unit_id), {"Unit", "Install"})
    out: list[Problem] = []
    reported: set[tuple[str, str]] = set()
    for a in unit.assignments:
        if a.section in known or a.section.startswith("X-") or (a.path, a.section) in reported:
            continue
        reported.add((a.path, a.section))
        out.append((a.path, a.line, f"unknown section [{a.section}]; systemd ignores its settings"))
    return out


def _exec_start(unit: Unit, unit_id: str) -> list[Problem]:
    if names.unit_type(unit_id) != "service" or not unit.fragment:
        return []
    start = unit.get("Service", "ExecStart")
    type_ = unit.get_value("Service", "Type") or ("simple" if start else "oneshot")
    if type_ != "oneshot" and not start:
        return [(unit.fragment, None, f"Type={type_} without ExecStart=; systemd refuses to load it")]
    if type_ != "oneshot" and len(start) > 1:
        return [(start[1].path, start[1].line, f"more than one ExecStart= for Type={type_}; refused")]
    if (
        type_ == "oneshot"
        and not start
        and not unit.get("Service", "ExecStop")
        and not unit.get_value("Unit", "SuccessAction")
    ):
        return [
            (unit.fragment, None, "no ExecStart=, ExecStop= or SuccessAction=; systemd refuses to load it")
        ]
    return []


def _missing_deps(index: UnitIndex, unit: Unit, unit_id: str) -> list[Problem]:
    out: list[Problem] = []
    for key in HARD_DEPS:
        for a in unit.get("Unit", key):
            try:
                words = split_words(a.value)
            except ValueError:
                continue
            for word in words:
                try:
                    dep = expand(word, unit_id)
                except SpecifierError:
                    continue
                if not names.is_valid(dep) or names.unit_type(dep) in IMPLICIT_TYPES:
                    continue
                if index.load(dep) is None:
                    out.append((a.path, a.line, f"{key}={dep}, but no unit file defines {dep}"))
    return out
