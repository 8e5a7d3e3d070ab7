"""Check kinds on systemd units: enabled or started at boot, missing executables, unbounded restarts,
units nobody asked for, broken units, and (live runs) the running manager's unit states.

The unit index (:mod:`imagelint.facts.systemd`) is built once per run and shared by every rule.
Every observation carries ``unit=`` (so waivers with ``unit:`` globs apply) and points at the unit
file line that matters.

"Started at boot" is the index's boot chain from ``default.target``, computed once in
:mod:`imagelint.facts.systemd.boot` for the rules and for ``imagelint units`` alike (a partial tree
without any ``default.target`` is walked as if on a stock base: see that module).

Severity follows evidence: a risk on its own (an unbounded restart policy, a broken unit nothing
starts) is reported low or info; ``systemd.boot_failure_loop`` combines the facts (started at boot,
will fail, restarts forever) into the one critical finding.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from imagelint.checks import register
from imagelint.checks.base import CheckContext, CheckKind, NotApplicable, Observation, ParamError, PathNeed
from imagelint.errors import ImageReadError

if TYPE_CHECKING:  # imported where used: rules that never touch units do not pay for them
    from imagelint.facts.systemd import Assignment, Unit, UnitIndex
    from imagelint.facts.systemd.manager import ManagerDefaults
    from imagelint.live import LiveState, LiveUnit

ARROW = " → "
ENABLED_STATES = ("enabled", "enabled-runtime", "linked", "linked-runtime")
LINK_SUFFIXES = (".wants", ".requires", ".upholds")
DSH_STATE = "/var/lib/systemd/deb-systemd-helper-enabled"
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

_UNITS = {
    "units": {
        "type": "array",
        "items": {"type": "string"},
        "description": "unit name globs to consider (aliases match too); default all",
    },
    "exclude_units": {"type": "array", "items": {"type": "string"}, "description": "unit globs to leave out"},
}
_AT_BOOT = {
    "at_boot": {
        "type": "boolean",
        "default": True,
        "description": "only units started at boot (reachable from default.target)",
    }
}


# -- shared facts ---------------------------------------------------------------------------------


def unit_index(ctx: CheckContext) -> UnitIndex:
    """The run's unit index, built once and accounted for in the report."""
    from imagelint.facts.systemd import UnitIndex

    def build() -> UnitIndex:
        index = UnitIndex.build(ctx.target)
        ctx.record(
            "systemd_units",
            lambda: {
                "units": len(index.units),
                "boot_units": len(index.boot_units()),
                "default_target": index.default_target,
                "problems": [p.to_dict() for p in index.problems],
            },
        )
        return index

    index: UnitIndex = ctx.fact("systemd.index", build)
    if not index.units and not index.problems:
        raise NotApplicable("no systemd unit files in the image")
    return index


def _manager_defaults(ctx: CheckContext) -> ManagerDefaults:
    from imagelint.facts.systemd.manager import ManagerDefaults

    def build() -> ManagerDefaults:
        defaults = ManagerDefaults.load(ctx.target)
        for p in defaults.problems:
            ctx.warn(p.path if p.line is None else f"{p.path}:{p.line}", p.message)
        return defaults

    defaults: ManagerDefaults = ctx.fact("systemd.manager", build)
    return defaults


def _enabling_links(ctx: CheckContext, index: UnitIndex) -> dict[str, list[str]]:
    """unit name -> the ``X.wants/NAME`` (``.requires``, ``.upholds``) links that name it, by path."""

    def build() -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for directory in index.search_path:
            for entry in ctx.target.listdir(directory):
                if not entry.endswith(LINK_SUFFIXES):
                    continue
                sub = f"{directory.rstrip('/')}/{entry}"
                for name in ctx.target.listdir(sub):
                    found.setdefault(name, []).append(f"{sub}/{name}")
        return found

    links: dict[str, list[str]] = ctx.fact("systemd.enabling_links", build)
    return links


def _wanting_target(link: str) -> str:
    parent = link.rsplit("/", 2)[-2]
    return parent[: parent.rfind(".")]


def boot_chain(ctx: CheckContext, index: UnitIndex, unit: Unit) -> list[str] | None:
    """The chain that starts ``unit`` at boot, or None: the index's, as ``imagelint units`` shows it."""
    return None if unit.boot_chain is None else list(unit.boot_chain)


def _matches(unit: Unit, globs: Sequence[str]) -> bool:
    candidates = [unit.name, *(unit.aliases or ())]
    if unit.unit_id:
        candidates.append(unit.unit_id)
    from imagelint.facts.systemd import names

    template = names.template_of(unit.name)
    if template:
        candidates.append(template)
    return any(fnmatch.fnmatchcase(c, g) for c in candidates for g in globs)


def _selected(unit: Unit, params: dict[str, Any]) -> bool:
    include = params.get("units")
    if include and not _matches(unit, include):
        return False
    return not _matches(unit, params.get("exclude_units", ()))


def _distinct(index: UnitIndex) -> list[Unit]:
    """One entry per loaded unit (aliases folded into the unit they name), templates left out."""
    from imagelint.facts.systemd import names

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


def _base_evidence(ctx: CheckContext, index: UnitIndex, unit: Unit) -> dict[str, Any]:
    chain = boot_chain(ctx, index, unit)
    return {
        "state": unit.state,
        "preset": unit.preset,
        "chain": ARROW.join(chain) if chain else "not started at boot",
        "fragment": unit.fragment,
        "dropins": list(unit.dropins),
    }


class _UnitKind(CheckKind):
    """Every image kind on units reads the unit index: unit directories, presets, system.conf,
    the package manager's enablement records, and what the unit files name (executables,
    EnvironmentFile=, condition paths) or find in the executable search path."""

    def paths(self, params: dict[str, Any]) -> list[PathNeed]:
        from imagelint.facts.systemd.execs import DEFAULT_EXEC_PATH
        from imagelint.facts.systemd.manager import DROPIN_DIRS, MAIN
        from imagelint.facts.systemd.paths import PRESET_DIRS, RAW_SEARCH_PATH

        needs = [
            PathNeed(d, "tree-content") for d in (*RAW_SEARCH_PATH, *PRESET_DIRS, *DROPIN_DIRS, DSH_STATE)
        ]
        needs += [PathNeed(MAIN), PathNeed("", "unit-references")]
        needs += [PathNeed(f"{d}/*", "metadata") for d in DEFAULT_EXEC_PATH]
        return needs


# -- image kinds ----------------------------------------------------------------------------------


@register
class UnitEnabled(_UnitKind):
    name = "systemd.unit_enabled"
    summary = (
        "Fires for each matching unit that is enabled or started at boot (with `reachable: true`: only "
        "those started at boot, with the chain that pulls them in); n/a if no unit matches."
    )
    parameters = {
        **_UNITS,
        "reachable": {
            "type": "boolean",
            "default": False,
            "description": "require the unit to be started at boot, not merely enabled",
        },
    }
    required = ("units",)
    variables = {
        "unit": "the unit",
        "state": "enablement state (systemctl is-enabled)",
        "preset": "the image's preset verdict",
        "chain": "how it is started at boot (default.target → … → unit)",
        "fragment": "the unit file",
    }

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        index = unit_index(ctx)
        matching = [u for u in _distinct(index) if _selected(u, params)]
        if not matching:
            raise NotApplicable(f"no unit matches {', '.join(params['units'])}")
        found = []
        for unit in matching:
            chain = boot_chain(ctx, index, unit)
            enabled = unit.state in ENABLED_STATES
            if chain is None and (params.get("reachable") or not enabled):
                continue
            found.append(
                Observation(
                    unit.unit_id or unit.name,
                    path=unit.fragment,
                    unit=unit.unit_id or unit.name,
                    evidence=_base_evidence(ctx, index, unit),
                )
            )
        return found


@register
class ExecMissing(_UnitKind):
    name = "systemd.exec_missing"
    summary = (
        "Fires for each unit started at boot that would run an executable (Exec*=) or read an "
        "EnvironmentFile= that is not in the image, unless a condition evaluable offline skips it."
    )
    parameters = {
        **_UNITS,
        "include_ignored": {
            "type": "boolean",
            "default": False,
            "description": "also report '-'-prefixed commands (systemd ignores their failure, even 203/EXEC)",
        },
    }
    variables = {
        "unit": "the unit",
        "missing": "what is missing, with the setting and line",
        "chain": "how it is started at boot",
        "state": "enablement state",
    }

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        from imagelint.facts.systemd import execs

        index = unit_index(ctx)
        include_ignored = params.get("include_ignored", False)
        found = []
        for unit in _distinct(index):
            if not _selected(unit, params) or unit.loaded is None or unit.loaded.status != "loaded":
                continue
            chain = boot_chain(ctx, index, unit)
            if chain is None:
                continue
            unit_id = unit.unit_id or unit.name
            if execs.skipped_by(execs.conditions(ctx.target, unit.assignments, unit_id)):
                continue
            problems, primary = _missing_files(ctx, unit, include_ignored)
            if primary is None:
                continue
            evidence = _base_evidence(ctx, index, unit)
            evidence["missing"] = "; ".join(problems)
            found.append(
                Observation(unit_id, path=primary.path, line=primary.line, unit=unit_id, evidence=evidence)
            )
        return found


def _missing_files(
    ctx: CheckContext, unit: Unit, include_ignored: bool = False
) -> tuple[list[str], Assignment | None]:
    """What the unit would run or read that is not in the image: (texts, the line to point at)."""
    from imagelint.facts.systemd import execs

    unit_id = unit.unit_id or unit.name
    problems: list[tuple[Assignment, str]] = []  # (assignment, text)
    by_exe: dict[tuple[str, str], list[Assignment]] = {}
    search = unit.get_value("Service", "ExecSearchPath")
    search_path = tuple(p for p in search.split(":") if p) if search else None
    for key in execs.EXEC_KEYS:
        for section in execs.EXEC_SECTIONS:
            for a in unit.get(section, key):
                for cmd in execs.commands(a, unit_id):
                    if cmd.executable is None or (cmd.ignore_failure and not include_ignored):
                        continue
                    res = execs.resolve_executable(ctx.target, cmd.executable, search_path)
                    if res.problem is not None:
                        ignored = " (failure ignored: '-')" if cmd.ignore_failure else ""
                        by_exe.setdefault((cmd.executable, res.problem + ignored), []).append(a)
    for (exe, problem), where in by_exe.items():
        settings = ", ".join(f"{a.key}= line {a.line}" for a in where)
        problems.append((where[0], f"{exe} is {problem} ({settings})"))
    for a in unit.get("Service", "EnvironmentFile"):
        optional = a.value.startswith("-")
        path = a.value[1:].strip() if optional else a.value.strip()
        if optional or not path.startswith("/") or _runtime_path(path):
            continue
        if ctx.target.stat(path) is None:
            problems.append((a, f"EnvironmentFile={path} is missing (line {a.line})"))
    if not problems:
        return [], None
    primary = next((a for w in by_exe.values() for a in w if a.key == "ExecStart"), problems[0][0])
    return [text for _, text in problems], primary


def _runtime_path(path: str) -> bool:
    from imagelint.facts.systemd.execs import RUNTIME_FS

    return any(path == fs or path.startswith(fs + "/") for fs in RUNTIME_FS)


@dataclass(frozen=True)
class _Value:
    value: float
    text: str
    source: str


def _unit_setting(
    unit: Unit, keys: tuple[tuple[str, str], ...], parse: Callable[[str], float]
) -> tuple[_Value | None, str | None]:
    """The last assignment of any of ``keys`` (section, key) in file order; (None, error) if invalid."""
    last: Assignment | None = None
    for a in unit.assignments:
        if (a.section, a.key) in keys:
            last = None if a.value == "" else a
    if last is None:
        return None, None
    try:
        return _Value(parse(last.value), last.value, f"{last.path}:{last.line}"), None
    except ValueError:
        return None, f"{last.key}={last.value} at {last.path}:{last.line} is invalid; systemd ignores it"


@register
class RestartUnbounded(_UnitKind):
    name = "systemd.restart_unbounded"
    summary = (
        "Fires for each service with Restart= whose RestartSec= and start limit (unit values, else the "
        "image's system.conf defaults) mean the start limit can never trip: it restarts forever."
    )
    parameters = {**_UNITS, **_AT_BOOT}
    variables = {
        "unit": "the unit",
        "restart": "the Restart= value",
        "restart_sec": "delay between restarts, and where it is set",
        "start_limit": "StartLimitBurst= in StartLimitIntervalSec=, and where they are set",
        "restarts_per_day": "restarts a day it allows (process run time counted as 0)",
        "why": "why the start limit can never trip",
        "chain": "how it is started at boot",
    }

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        index = unit_index(ctx)
        found = []
        for unit in _distinct(index):
            if not _selected(unit, params):
                continue
            if params.get("at_boot", True) and boot_chain(ctx, index, unit) is None:
                continue
            loop = _restart_loop(ctx, unit)
            if loop is None:
                continue
            a, restart_evidence = loop
            evidence = _base_evidence(ctx, index, unit)
            evidence.update(restart_evidence)
            unit_id = unit.unit_id or unit.name
            found.append(Observation(unit_id, path=a.path, line=a.line, unit=unit_id, evidence=evidence))
        return found


def _restart_loop(ctx: CheckContext, unit: Unit) -> tuple[Assignment, dict[str, Any]] | None:
    """(the Restart= line, evidence) if the loaded service restarts forever; None otherwise."""
    from imagelint.facts.systemd import names
    from imagelint.facts.systemd.timespan import format_seconds, parse_timespan

    if names.unit_type(unit.unit_id or unit.name) != "service":
        return None
    if unit.loaded is None or unit.loaded.status != "loaded":
        return None
    restart = unit.get("Service", "Restart")
    if not restart or restart[-1].value == "no":
        return None
    defaults = _manager_defaults(ctx)
    sec, err1 = _unit_setting(unit, (("Service", "RestartSec"),), parse_timespan)
    interval, err2 = _unit_setting(
        unit,
        (
            ("Unit", "StartLimitIntervalSec"),
            ("Unit", "StartLimitInterval"),
            ("Service", "StartLimitInterval"),
        ),
        parse_timespan,
    )
    burst, err3 = _unit_setting(unit, (("Unit", "StartLimitBurst"), ("Service", "StartLimitBurst")), int)
    for err in (err1, err2, err3):
        if err:
            ctx.warn(unit.unit_id or unit.name, err)
    sec = sec or _Value(defaults.restart_sec.value, defaults.restart_sec.text, defaults.restart_sec.source)
    interval = interval or _Value(
        defaults.start_limit_interval.value,
        defaults.start_limit_interval.text,
        defaults.start_limit_interval.source,
    )
    burst = burst or _Value(
        defaults.start_limit_burst.value,
        defaults.start_limit_burst.text,
        defaults.start_limit_burst.source,
    )
    if math.isinf(sec.value):
        return None  # never restarts
    why = _never_trips(sec.value, interval.value, int(burst.value))
    if why is None:
        return None
    per_day = f"{86400 / sec.value:,.0f}" if sec.value > 0 else "unbounded (no delay)"
    a = restart[-1]
    limit_source = burst.source if burst.source == interval.source else f"{burst.source}; {interval.source}"
    return a, {
        "restart": a.value,
        "restart_sec": f"{format_seconds(sec.value)} ({sec.source})",
        "start_limit": f"{int(burst.value)} starts in {format_seconds(interval.value)} ({limit_source})",
        "restarts_per_day": per_day,
        "why": why,
        "restart_summary": f"Restart={a.value}, RestartSec={sec.text}: up to {per_day} restarts a day",
    }


def _never_trips(restart_sec: float, interval: float, burst: int) -> str | None:
    """Why the start limit can never stop an auto-restart loop, or None if it can.

    systemd 252's ratelimit: the window opens at the first start; a start is refused when it is
    start number burst+1 within ``interval`` of the window's opening, and the window reopens at the
    first start after that. Restarts come RestartSec apart (plus the time the process runs, taken as
    0: the best case for the limit), so start burst+1 comes at burst×RestartSec. If that is not
    before the window closes, the limit never trips (any run time only pushes it further out).
    """
    from imagelint.facts.systemd.timespan import format_seconds

    if interval <= 0:
        return "StartLimitIntervalSec=0 disables the start limit"
    if burst <= 0:
        return "StartLimitBurst=0 disables the start limit"
    span = burst * restart_sec
    if span >= interval:
        return (
            f"{burst + 1} starts take at least {burst}×{format_seconds(restart_sec)} = "
            f"{format_seconds(span)}, not less than the {format_seconds(interval)} interval"
        )
    return None


@register
class UnitUnexpected(_UnitKind):
    name = "systemd.unit_unexpected"
    summary = (
        "Fires for each unit started at boot that was enabled (not static or indirect) although it is "
        "neither in the config's expected-units, nor enabled by a preset rule of the image, nor "
        "recorded by the package manager's enablement (Debian's deb-systemd-helper)."
    )
    parameters = {
        **_UNITS,
        "package_records": {
            "type": "boolean",
            "default": True,
            "description": "count units that Debian's deb-systemd-helper recorded as enabled by a package",
        },
    }
    variables = {
        "unit": "the unit",
        "state": "enablement state",
        "preset": "the image's preset verdict",
        "preset_rule": "the preset rule that matches, or that none does",
        "enabled_by": "the symlinks that enable it",
        "chain": "how it is started at boot",
    }

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        from imagelint.facts.systemd import names

        index = unit_index(ctx)
        expected = ctx.expected_units
        links = _enabling_links(ctx, index)
        found = []
        for unit in _distinct(index):
            if not _selected(unit, params) or not _unexpected(ctx, index, unit, params):
                continue
            template = names.template_of(unit.name)
            rule = index.presets.rule_for(unit.name) or (
                index.presets.rule_for(template) if template else None
            )
            enabled_by = [p for n in (unit.name, *unit.aliases) for p in links.get(n, [])]
            evidence = _base_evidence(ctx, index, unit)
            evidence.update(
                {
                    "preset_rule": (
                        f"disabled by {rule.path}:{rule.line} ({'enable' if rule.enable else 'disable'} "
                        f"{rule.pattern})"
                        if rule
                        else "no preset rule of the image names it"
                    ),
                    "enabled_by": ", ".join(enabled_by) or unit.path or "",
                    "expected_units": list(expected),
                }
            )
            unit_id = unit.unit_id or unit.name
            path = enabled_by[0] if enabled_by else unit.fragment
            found.append(Observation(unit_id, path=path, unit=unit_id, evidence=evidence))
        return found


def _unexpected(ctx: CheckContext, index: UnitIndex, unit: Unit, params: dict[str, Any]) -> bool:
    """Enabled, started at boot, and declared by nobody (config, preset, package manager)."""
    from imagelint.facts.systemd import names

    if unit.state not in ENABLED_STATES or boot_chain(ctx, index, unit) is None:
        return False
    expected = ctx.expected_units
    if expected and _matches(unit, expected):
        return False
    template = names.template_of(unit.name)
    rule = index.presets.rule_for(unit.name) or (index.presets.rule_for(template) if template else None)
    if rule is not None and rule.enable:
        return False
    return not (params.get("package_records", True) and _packaged(ctx, unit))


def _packaged(ctx: CheckContext, unit: Unit) -> bool:
    for name in (unit.name, *unit.aliases):
        if ctx.target.lstat(f"{DSH_STATE}/{name}.dsh-also") is not None:
            return True
        if ctx.target.glob(f"{DSH_STATE}/*/{name}"):
            return True
    return False


@register
class UnitBroken(_UnitKind):
    name = "systemd.unit_broken"
    summary = (
        "Fires for what systemd-analyze verify would refuse: unknown sections, a service without a "
        "required ExecStart=, Requires=/Requisite=/BindsTo= on units that do not exist, and every "
        "unit file or link the index could not read or understand."
    )
    parameters = {
        **_UNITS,
        "at_boot": {
            "type": "boolean",
            "default": False,
            "description": "only units started at boot or enabled",
        },
        "not_at_boot": {
            "type": "boolean",
            "default": False,
            "description": "only units neither started at boot nor enabled (the complement of at_boot)",
        },
        "problems": {
            "type": "boolean",
            "default": True,
            "description": "also report the unit index's problems (unreadable files, link loops...)",
        },
    }
    variables = {
        "unit": "the unit (if any)",
        "where": "the unit, or the file or link the problem is about",
        "problem": "what is wrong",
        "chain": "how it is started at boot",
    }

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        index = unit_index(ctx)
        found: list[Observation] = []
        for unit in _distinct(index):
            if (
                not _selected(unit, params)
                or unit.loaded is None
                or unit.loaded.status not in ("loaded", "error")
            ):
                continue
            chain = boot_chain(ctx, index, unit)
            live = chain is not None or unit.state in ENABLED_STATES
            if (params.get("at_boot") and not live) or (params.get("not_at_boot") and live):
                continue
            unit_id = unit.unit_id or unit.name
            for path, line, problem in self._problems(index, unit, unit_id):
                evidence = {
                    "where": unit_id,
                    "problem": problem,
                    "chain": ARROW.join(chain) if chain else f"{unit.state}, not started at boot",
                }
                found.append(
                    Observation(
                        f"{unit_id}: {problem}", path=path, line=line, unit=unit_id, evidence=evidence
                    )
                )
        if params.get("problems", True) and not params.get("units"):
            from imagelint.facts.systemd import names

            for p in index.problems:
                base = p.path.rsplit("/", 1)[-1]
                unit_name = base if names.is_valid(base) else None
                where = p.path if p.line is None else f"{p.path}:{p.line}"
                found.append(
                    Observation(
                        where,
                        path=p.path,
                        line=p.line,
                        unit=unit_name,
                        evidence={"where": where, "problem": p.message, "chain": ""},
                    )
                )
        return found

    @staticmethod
    def _problems(index: UnitIndex, unit: Unit, unit_id: str) -> list[tuple[str | None, int | None, str]]:
        from imagelint.facts.systemd import names, split_words
        from imagelint.facts.systemd.specifiers import SpecifierError, expand

        out: list[tuple[str | None, int | None, str]] = []
        utype = names.unit_type(unit_id)
        known = KNOWN_SECTIONS.get(utype, {"Unit", "Install"})
        reported: set[tuple[str, str]] = set()
        for a in unit.assignments:
            if a.section in known or a.section.startswith("X-") or (a.path, a.section) in reported:
                continue
            reported.add((a.path, a.section))
            out.append((a.path, a.line, f"unknown section [{a.section}]; systemd ignores its settings"))
        if utype == "service" and unit.fragment:
            start = unit.get("Service", "ExecStart")
            type_ = unit.get_value("Service", "Type") or ("simple" if start else "oneshot")
            where = (unit.fragment, None)
            if type_ != "oneshot" and not start:
                out.append((*where, f"Type={type_} without ExecStart=; systemd refuses to load it"))
            elif type_ != "oneshot" and len(start) > 1:
                out.append(
                    (start[1].path, start[1].line, f"more than one ExecStart= for Type={type_}; refused")
                )
            elif (
                type_ == "oneshot"
                and not start
                and not unit.get("Service", "ExecStop")
                and not unit.get_value("Unit", "SuccessAction")
            ):
                out.append((*where, "no ExecStart=, ExecStop= or SuccessAction=; systemd refuses to load it"))
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


@register
class EnabledNeverStarted(_UnitKind):
    name = "systemd.enabled_not_started"
    summary = (
        "Fires for each unit enabled (linked into a .wants/, .requires/ or .upholds/ directory) only "
        "into targets that nothing pulls in at boot, so it is enabled yet never started."
    )
    parameters = {
        **_UNITS,
        "exclude_targets": {
            "type": "array",
            "items": {"type": "string"},
            "description": "globs of targets started on demand (by udev, logind, shutdown...), not at boot",
        },
    }
    variables = {
        "unit": "the unit",
        "targets": "the units it is enabled into, none of them started at boot",
        "enabled_by": "the symlinks that enable it",
        "state": "enablement state",
    }

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        index = unit_index(ctx)
        links = _enabling_links(ctx, index)
        skip = params.get("exclude_targets", ())
        found = []
        for unit in _distinct(index):
            if unit.state not in ENABLED_STATES or unit.boot_chain is not None or not _selected(unit, params):
                continue
            enabled_by = [p for n in (unit.name, *unit.aliases) for p in links.get(n, [])]
            wanting = list(dict.fromkeys(_wanting_target(link) for link in enabled_by))
            if not wanting or any(fnmatch.fnmatchcase(t, g) for t in wanting for g in skip):
                continue
            unit_id = unit.unit_id or unit.name
            evidence = _base_evidence(ctx, index, unit)
            evidence.update({"targets": ", ".join(wanting), "enabled_by": ", ".join(enabled_by)})
            found.append(Observation(unit_id, path=enabled_by[0], unit=unit_id, evidence=evidence))
        return found


_CONDITION = {"type": "object", "required": ["kind"], "description": "a check spec: {kind: ..., params}"}


@register
class BootFailureLoop(_UnitKind):
    name = "systemd.boot_failure_loop"
    summary = (
        "Fires for each service that is started at boot, will fail (evidence: an executable or "
        "required file missing, a vendor configuration missing, enabled without being expected, "
        "failures or restart loops in the journal or on the live host) and restarts forever; "
        "one observation names every piece of evidence."
    )
    parameters = {
        **_UNITS,
        "unexpected": {
            "type": "boolean",
            "default": True,
            "description": "count 'enabled but not expected' (as systemd.unit_unexpected) as evidence",
        },
        "vendor_config": {
            "type": "array",
            "description": "configuration a unit needs: where `unless` (a check spec, e.g. file.contains) "
            "finds nothing, `reason` is evidence that the unit fails",
            "items": {
                "type": "object",
                "required": ["units", "unless", "reason"],
                "additionalProperties": False,
                "properties": {
                    "units": {"type": "array", "items": {"type": "string"}},
                    "unless": _CONDITION,
                    "reason": {"type": "string"},
                },
            },
        },
        "observed": {
            "type": "array",
            "description": "check specs whose observations of a unit (journal, live) are evidence; "
            "`reason` is formatted with the observation's variables",
            "items": {
                "type": "object",
                "required": ["check", "reason"],
                "additionalProperties": False,
                "properties": {"check": _CONDITION, "reason": {"type": "string"}},
            },
        },
    }
    variables = {
        "unit": "the unit",
        "chain": "how it is started at boot",
        "failure": "every piece of evidence that it will fail, '; '-separated",
        "restart_summary": "Restart=, RestartSec= and the restarts a day they allow",
        "restart": "the Restart= value",
        "restart_sec": "delay between restarts, and where it is set",
        "start_limit": "the start limit, and where it is set",
        "why": "why the start limit can never trip",
    }

    def paths(self, params: dict[str, Any]) -> list[PathNeed]:
        from imagelint.checks import registry

        needs = super().paths(params)
        for spec in [v["unless"] for v in params.get("vendor_config", ())] + [
            o["check"] for o in params.get("observed", ())
        ]:
            needs += registry()[spec["kind"]].paths(_spec_params(spec))
        return needs

    def validate(self, params: dict[str, Any]) -> None:
        from imagelint.checks import registry

        specs: list[tuple[list[str | int], dict[str, Any]]] = [
            (["vendor_config", i, "unless"], v["unless"])
            for i, v in enumerate(params.get("vendor_config", ()))
        ]
        specs += [(["observed", i, "check"], o["check"]) for i, o in enumerate(params.get("observed", ()))]
        for at, spec in specs:
            kind = registry().get(spec["kind"])
            if kind is None or kind.name == self.name:
                raise ParamError(at, f"unknown check kind {spec['kind']!r}")
            kind.validate(_spec_params(spec))

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        from imagelint.facts.systemd import execs

        index = unit_index(ctx)
        observed = self._observed(ctx, params)
        found = []
        for unit in _distinct(index):
            chain = boot_chain(ctx, index, unit)
            if chain is None or not _selected(unit, params):
                continue
            loop = _restart_loop(ctx, unit)
            if loop is None:
                continue
            unit_id = unit.unit_id or unit.name
            if execs.skipped_by(execs.conditions(ctx.target, unit.assignments, unit_id)):
                continue  # a condition evaluable offline skips it: it does not start, so does not fail
            missing, _primary = _missing_files(ctx, unit)
            failure = list(missing)
            for entry in params.get("vendor_config", ()):
                if _matches(unit, entry["units"]) and not _run(ctx, entry["unless"]):
                    failure.append(entry["reason"])
            if params.get("unexpected", True) and _unexpected(ctx, index, unit, {}):
                failure.append("enabled but not expected")
            for name in (unit_id, *unit.aliases):
                failure.extend(observed.get(name, ()))
            if not failure:
                continue
            a, restart_evidence = loop
            evidence = _base_evidence(ctx, index, unit)
            evidence.update(restart_evidence)
            evidence["failure"] = "; ".join(dict.fromkeys(failure))
            found.append(Observation(unit_id, path=a.path, line=a.line, unit=unit_id, evidence=evidence))
        return found

    @staticmethod
    def _observed(ctx: CheckContext, params: dict[str, Any]) -> dict[str, list[str]]:
        """unit -> reasons, from the observations of the `observed` checks (absent data: none)."""
        out: dict[str, list[str]] = {}
        for entry in params.get("observed", ()):
            for obs in _run(ctx, entry["check"], optional=True):
                if obs.unit:
                    out.setdefault(obs.unit, []).append(entry["reason"].format_map(_Dashed(obs.variables())))
        return out


class _Dashed(dict[str, Any]):
    """Template variables; one the observation lacks renders as '-' (as in rule messages)."""

    def __missing__(self, key: str) -> str:
        return "-"


def _spec_params(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k != "kind"}


def _run(ctx: CheckContext, spec: dict[str, Any], *, optional: bool = False) -> list[Observation]:
    """The observations of a check spec (the same kinds rule conditions use); none if n/a. With
    ``optional``, data that cannot be had (no journal, no live systemd) is no evidence either: the
    rules that read it report that themselves."""
    from imagelint.checks import registry
    from imagelint.errors import ImageLintError

    try:
        return registry()[spec["kind"]].evaluate(ctx, _spec_params(spec))
    except NotApplicable:
        return []
    except ImageLintError:
        if optional:
            return []
        raise


# -- live kinds (scope host) ---------------------------------------------------------------------


def _live(ctx: CheckContext) -> LiveState:
    live: LiveState | None = getattr(ctx, "live", None)
    if live is None:
        raise NotApplicable("not a live run (use `imagelint audit --live` on the running host)")
    ctx.record("systemd_live", live.to_dict)
    if not live.available:
        # the user asked for a live check that could not run: inconclusive, never "not applicable"
        reason = " ".join((live.reason or "no answer").split())
        where = "systemctl show" if live.booted else "/run/systemd/system"
        raise ImageReadError(where, reason)
    return live


def _live_evidence(u: LiveUnit) -> dict[str, Any]:
    return {
        "active_state": u.active_state,
        "sub_state": u.sub_state,
        "result": u.result,
        "n_restarts": u.n_restarts,
        "exec_main_status": u.exec_main_status,
        "unit_file_state": u.unit_file_state,
    }


_LIVE_VARS = {
    "unit": "the unit",
    "active_state": "ActiveState",
    "sub_state": "SubState",
    "result": "Result",
    "n_restarts": "NRestarts (automatic restarts since the unit was loaded)",
    "exec_main_status": "exit status of the main process",
    "unit_file_state": "UnitFileState (enabled, static...)",
}


def _live_selected(name: str, params: dict[str, Any]) -> bool:
    include = params.get("units")
    if include and not any(fnmatch.fnmatchcase(name, g) for g in include):
        return False
    return not any(fnmatch.fnmatchcase(name, g) for g in params.get("exclude_units", ()))


@register
class LiveRestarting(CheckKind):
    name = "systemd.live_restarting"
    summary = (
        "Live: fires for each service of the running manager that is waiting to restart (SubState "
        "auto-restart) or has restarted automatically at least `min_restarts` times."
    )
    parameters = {
        **_UNITS,
        "min_restarts": {
            "type": "integer",
            "minimum": 1,
            "description": "NRestarts at or above which it fires",
        },
        "auto_restart": {
            "type": "boolean",
            "default": True,
            "description": "also fire for any unit in SubState auto-restart",
        },
    }
    required = ("min_restarts",)
    variables = dict(_LIVE_VARS)

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        live = _live(ctx)
        found = []
        for u in live.units.values():
            if not _live_selected(u.unit, params):
                continue
            looping = params.get("auto_restart", True) and u.sub_state == "auto-restart"
            if looping or (u.n_restarts or 0) >= params["min_restarts"]:
                found.append(Observation(u.unit, unit=u.unit, evidence=_live_evidence(u)))
        return found


@register
class LiveFailed(CheckKind):
    name = "systemd.live_failed"
    summary = "Live: fires for each service of the running manager in ActiveState failed."
    parameters = {**_UNITS}
    variables = dict(_LIVE_VARS)

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        live = _live(ctx)
        return [
            Observation(u.unit, unit=u.unit, evidence=_live_evidence(u))
            for u in live.units.values()
            if u.active_state == "failed" and _live_selected(u.unit, params)
        ]
