"""What the collector gathers: computed at home from the loaded rule packs and the config.

Each check kind declares the image paths it reads (:meth:`imagelint.checks.base.CheckKind.paths`);
the plan is every selected rule's needs, its conditions' needs included, in the collector's
directive form (see ``collect.sh``), plus the live and soak probes and the size caps. Rules that
run at home only on what the bundle holds see exactly what a local audit of the instance would
see of those paths; what the collector had to leave out (over a cap) is named in the bundle's
manifest and makes the rules that read it inconclusive.
"""

from __future__ import annotations

from imagelint import __version__
from imagelint.checks import registry
from imagelint.checks.base import PathNeed
from imagelint.config import Config
from imagelint.records import dataclass
from imagelint.rulepacks import CheckSpec, RulePack, Scope

DIRECTIVES = {
    "content": "C",
    "metadata": "M",
    "tree": "T",
    "tree-content": "R",
    "journal": "J",
    "sshd": "S",
    "unit-references": "U",
    "not-collected": "N",
}


@dataclass(frozen=True)
class Limits:
    """Caps the collector keeps to (bytes, entries); the runner's extraction caps follow from them."""

    file: int = 16 * 1024 * 1024  # content of one file (imagelint's own read limit)
    journal: int = 256 * 1024 * 1024  # one journal file
    total: int = 512 * 1024 * 1024  # all content together
    entries: int = 300_000  # paths below walked trees


@dataclass(frozen=True)
class Plan:
    needs: tuple[PathNeed, ...]
    show: bool = True  # record `systemctl show` (the live rules)
    soak_seconds: float = 0.0
    soak_interval: float = 5.0
    limits: Limits = Limits()
    root: str | None = None  # collect from this directory instead of / (tests)

    def text(self) -> str:
        """plan.txt for ``collect.sh``."""
        lines = [f"version {__version__}"]
        if self.root:
            lines.append(f"root {self.root}")
        for name in ("file", "journal", "total", "entries"):
            lines.append(f"limit {name} {getattr(self.limits, name)}")
        if self.show:
            lines.append("show 1")
        if self.soak_seconds > 0:
            lines.append(f"soak {round(self.soak_seconds * 100)} {max(1, round(self.soak_interval * 100))}")
        for need in self.needs:
            op = DIRECTIVES[need.how]
            lines.append(op if op == "U" else f"{op} {need.glob}")
        return "\n".join(lines) + "\n"


def _spec_needs(spec: CheckSpec) -> list[PathNeed]:
    needs = registry()[spec.kind].paths(spec.arguments)
    for condition in (*spec.when, *spec.unless):
        needs += _spec_needs(condition)
    return needs


def needs_for(
    packs: list[RulePack], config: Config, scopes: tuple[Scope, ...], *, runtime: bool = True
) -> tuple[PathNeed, ...]:
    """The paths every rule the run would evaluate reads, once each, in a stable order.

    ``runtime=False`` leaves out what a boot creates under ``/run`` (generator output, transient and
    runtime units), keeping the volatile journal: on a throwaway instance the image is judged, as an
    offline audit of it would judge it, and the boot's own state comes from ``systemctl show``."""
    from imagelint.engine import skip_reason

    seen: dict[PathNeed, None] = {}
    for rule in (r for p in packs for r in p.rules):
        if skip_reason(rule, config, scopes):
            continue
        for need in _spec_needs(rule.check):
            if "\n" in need.glob:
                continue
            if not runtime and need.how != "journal" and (need.glob + "/").startswith("/run/"):
                need = PathNeed(need.glob, "not-collected")  # absent in the image, as offline
            seen.setdefault(need)
    if Scope.IMAGE in scopes:  # every image-scope report carries the inventory
        from imagelint.checks.systemd import inventory_needs

        for need in inventory_needs():
            seen.setdefault(need)
    for need in root_mark_needs():
        seen.setdefault(need)
    return tuple(seen)


def root_mark_needs() -> tuple[PathNeed, ...]:
    """The marks of an OS root every bundle is asked for before it is judged
    (:mod:`imagelint.targets.osroot`): metadata is enough (links followed by the collector); the
    os-release with its content, as the inventory reads it."""
    from imagelint.targets.osroot import MARK_PATHS, OS_RELEASE

    return tuple(PathNeed(p) if p in OS_RELEASE else PathNeed(p, "metadata") for p in MARK_PATHS)


def instance_plan(
    packs: list[RulePack], config: Config, *, soak_seconds: float, soak_interval: float
) -> Plan:
    """The plan for a throwaway instance or a fleet host: what the loaded rules read of the image (not
    what the boot made under /run: see :func:`needs_for`), ``systemctl show``, and the soak."""
    needs = needs_for(packs, config, (Scope.IMAGE, Scope.HOST, Scope.SOAK), runtime=False)
    return Plan(needs, show=True, soak_seconds=soak_seconds, soak_interval=soak_interval)


def units_plan() -> Plan:
    """The plan of ``units`` on a host: what the unit index and the inventory read; no live state."""
    from imagelint.checks.systemd import inventory_needs, unit_needs

    return Plan(tuple(dict.fromkeys((*unit_needs(), *inventory_needs(), *root_mark_needs()))), show=False)
