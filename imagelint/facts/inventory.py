"""The report's inventory: what an image starts at boot and how, plus a few image facts.

Built once per run from facts the rules already share (the unit index and the manager's defaults
of :mod:`imagelint.facts.systemd`), so it costs little more than reading each unit file the rules
did not look at. Compact and stable (keys sorted, no timings, no host paths), so that two
inventories compare field by field (``imagelint diff``) and the JSON report is reproducible.

Per unit (every unit name of the index except aliases, which are listed under their unit):

- ``state``, ``preset`` (as ``systemctl list-unit-files``), ``load``, ``fragment``, ``aliases``;
- ``boot_chain``: the chain from ``default.target`` that starts it, or null;
- ``activated_by``: the socket, timer, path or automount units that activate it, each with its
  type and whether that trigger itself is started at boot;
- ``restart`` (services that restart at all; null for ``Restart=no`` and other units): effective
  ``Restart=``, ``RestartSec=``, start limit, and whether the limit can ever stop a restart loop
  (:mod:`imagelint.facts.systemd.restart`);
- ``execs``: each ``Exec…=`` executable, with whether it exists in the image (null: not knowable
  offline, e.g. ``$VAR``);
- ``dropins``: each drop-in's path and the SHA-256 of its content.

Image facts: ``os_release``, ``kernel_cmdline`` (each source, see :mod:`imagelint.facts.bootconfig`)
and ``packages`` (:mod:`imagelint.facts.packages`).
"""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Any

from imagelint.errors import PERMISSION_DENIED, ImageDamageError, ImageReadError
from imagelint.facts.bootconfig import image_facts
from imagelint.facts.packages import load_packages

if TYPE_CHECKING:
    from imagelint.facts.systemd import Unit, UnitIndex
    from imagelint.facts.systemd.execs import UnitCommands
    from imagelint.facts.systemd.manager import ManagerDefaults
    from imagelint.targets.interface import Target

INVENTORY_VERSION = 1


def build_inventory(
    target: Target,
    index: UnitIndex | None,
    defaults: ManagerDefaults | None,
    *,
    live: bool = False,
    commands: UnitCommands | None = None,
) -> dict[str, Any]:
    """The inventory of ``target``; ``index``/``defaults`` are the run's own (None: no systemd), and
    so is ``commands``, the executables the rules already resolved (None: resolved here)."""
    from imagelint.facts.systemd.execs import UnitCommands

    problems: list[str] = []
    units: dict[str, dict[str, Any]] = {}
    if index is not None and defaults is not None:
        found = commands if commands is not None else UnitCommands(target)
        units = _units(target, index, defaults, problems, found)
        problems += [str(p) for p in index.problems]
    facts = image_facts(target, live=live)
    packages = load_packages(target)
    problems += facts.pop("problems") + packages.problems
    damaged = target.damaged()
    # a denied read is no damage: its reason says to run as root
    problems += [
        f"{path}: {'' if PERMISSION_DENIED in why else 'damaged, '}not read: {why}" for path, why in damaged
    ]
    return {
        "version": INVENTORY_VERSION,
        "complete": not damaged and not _incomplete(index, packages.complete),
        "default_target": index.default_target if index is not None else None,
        "default_target_assumed": index.default_target_assumed if index is not None else False,
        "units": units,
        **facts,
        "packages": packages.to_dict(),
        "problems": sorted(set(problems)),
    }


def _incomplete(index: UnitIndex | None, packages_complete: bool) -> bool:
    """Unreadable data (not merely odd unit files) makes the inventory incomplete."""
    unread = index is not None and any(
        "not read" in p.message or "too large" in p.message for p in index.problems
    )
    return unread or not packages_complete


def _units(
    target: Target,
    index: UnitIndex,
    defaults: ManagerDefaults,
    problems: list[str],
    commands: UnitCommands,
) -> dict[str, dict[str, Any]]:
    from imagelint.facts.systemd import names

    activated: dict[str, list[dict[str, Any]]] = {}
    for unit in index:
        if unit.state == "alias" or unit.unit_id is None or unit.unit_id != unit.name:
            continue
        for name in index.triggers(unit):
            activated.setdefault(name, []).append(
                {"by": unit.name, "type": names.unit_type(unit.name), "at_boot": unit.boot_chain is not None}
            )
    found: dict[str, dict[str, Any]] = {}
    for unit in sorted(index, key=lambda u: u.name):
        if unit.state == "alias":
            continue
        found[unit.name] = _unit(target, unit, defaults, activated, problems, commands)
    return found


def _unit(
    target: Target,
    unit: Unit,
    defaults: ManagerDefaults,
    activated: dict[str, list[dict[str, Any]]],
    problems: list[str],
    commands: UnitCommands,
) -> dict[str, Any]:
    from imagelint.facts.systemd import names
    from imagelint.facts.systemd.restart import restart_policy

    loaded = unit.loaded is not None and unit.loaded.status == "loaded"
    template = names.name_kind(unit.name) is names.NameKind.TEMPLATE
    entry: dict[str, Any] = {
        "state": unit.state,
        "preset": unit.preset,
        "load": unit.loaded.status if unit.loaded else None,
        "fragment": unit.fragment,
        "aliases": sorted(unit.aliases),
        "boot_chain": unit.boot_chain,
        "activated_by": sorted(activated.get(unit.name, []), key=lambda a: str(a["by"])),
        "restart": None,
        "execs": [],
        "dropins": [_dropin(target, path, problems) for path in unit.dropins],
    }
    if not loaded or template:
        return entry
    policy = restart_policy(unit, defaults)
    if policy is not None:
        entry["restart"] = {
            "restart": policy.restart.value,
            "restart_sec": _finite(policy.restart_sec.value),
            "start_limit_burst": int(policy.burst.value),
            "start_limit_interval_sec": _finite(policy.interval.value),
            "limit_can_trip": policy.never_trips is None,
            "why": policy.never_trips,
        }
    execs: dict[tuple[str, str], bool | None] = {}
    for cmd, res in commands(unit):
        if cmd.executable is None or res is None:
            execs.setdefault((cmd.key, cmd.raw.split(" ", 1)[0]), None)
            continue
        execs[(cmd.key, res.path or cmd.executable)] = res.problem is None
    entry["execs"] = [{"key": k, "path": p, "exists": e} for (k, p), e in execs.items()]
    return entry


def _finite(seconds: float) -> float | None:
    """Seconds for JSON, which has no infinity: None stands for it."""
    return None if math.isinf(seconds) else seconds


def _dropin(target: Target, path: str, problems: list[str]) -> dict[str, Any]:
    try:
        digest: str | None = hashlib.sha256(target.read_bytes(path)).hexdigest()
    except (ImageReadError, ImageDamageError) as exc:  # damage: in the target's account too
        problems.append(f"{path}: {exc.reason}")
        digest = None
    return {"path": path, "sha256": digest}
