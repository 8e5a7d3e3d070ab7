"""Who enabled a unit, and which units count as distinct: the facts behind "enabled but unused".

- :data:`ENABLED_STATES`: the ``systemctl is-enabled`` states that mean someone enabled the unit.
- :func:`enabling_links`: every ``X.wants/NAME`` (``.requires``, ``.upholds``) link in the unit
  search path, by the name it links; :func:`wanting_unit` names the unit such a link enables into.
- :func:`recorded_by_package`: Debian's deb-systemd-helper records the units a package enabled
  under ``/var/lib/systemd/deb-systemd-helper-enabled`` (``NAME.dsh-also`` and ``TARGET.wants/NAME``).
- :func:`distinct_units` folds aliases into the unit they name and leaves templates out, so a rule
  reports each loaded unit once; :func:`unit_matches` matches a unit, its aliases, its id and its
  template against name globs, as rules select units.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import TYPE_CHECKING

from imagelint.facts.systemd import names
from imagelint.facts.systemd.install import LINK_DIR_SUFFIXES

if TYPE_CHECKING:
    from imagelint.facts.systemd.index import Unit, UnitIndex
    from imagelint.targets import RootfsTarget

ENABLED_STATES = ("enabled", "enabled-runtime", "linked", "linked-runtime")
DSH_STATE = "/var/lib/systemd/deb-systemd-helper-enabled"


def enabling_links(target: RootfsTarget, index: UnitIndex) -> dict[str, list[str]]:
    """unit name -> the ``X.wants/NAME`` (``.requires``, ``.upholds``) links that name it, by path."""
    found: dict[str, list[str]] = {}
    for directory in index.search_path:
        for entry in target.listdir(directory):
            if not entry.endswith(LINK_DIR_SUFFIXES):
                continue
            sub = f"{directory.rstrip('/')}/{entry}"
            for name in target.listdir(sub):
                found.setdefault(name, []).append(f"{sub}/{name}")
    return found


def wanting_unit(link: str) -> str:
    """``/etc/systemd/system/multi-user.target.wants/x.service`` -> ``multi-user.target``."""
    parent = link.rsplit("/", 2)[-2]
    return parent[: parent.rfind(".")]


def recorded_by_package(target: RootfsTarget, unit: Unit) -> bool:
    """Whether Debian's deb-systemd-helper recorded the unit (or an alias) as enabled by a package."""
    for name in (unit.name, *unit.aliases):
        if target.lstat(f"{DSH_STATE}/{name}.dsh-also") is not None:
            return True
        if target.glob(f"{DSH_STATE}/*/{name}"):
            return True
    return False


def unit_matches(unit: Unit, globs: Sequence[str]) -> bool:
    candidates = [unit.name, *(unit.aliases or ())]
    if unit.unit_id:
        candidates.append(unit.unit_id)
    template = names.template_of(unit.name)
    if template:
        candidates.append(template)
    return any(fnmatch.fnmatchcase(c, g) for c in candidates for g in globs)


def distinct_units(index: UnitIndex) -> list[Unit]:
    """One entry per loaded unit (aliases folded into the unit they name), templates left out."""
    seen: dict[str, Unit] = {}
    for unit in index:
        if unit.state == "alias" or unit.loaded is None:
            continue
        if names.name_kind(unit.name) is names.NameKind.TEMPLATE:
            continue
        key = unit.unit_id or unit.name
        if key not in seen or (seen[key].boot_chain is None and unit.boot_chain is not None):
            seen[key] = unit
    return list(seen.values())
