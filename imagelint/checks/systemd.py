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

A vendor configuration missing from the image is evidence that a unit fails unless the owner said
otherwise: :func:`config_missing`, used by ``systemd.unit_enabled`` (``configured``) and by
``systemd.boot_failure_loop`` (``vendor_config``) alike, weighs the config's ``expected-units`` and
``provided-at-launch``, and says so when they change the outcome.
"""

from __future__ import annotations

import fnmatch
from dataclasses import field
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from imagelint.checks import register
from imagelint.checks.base import CheckCall, CheckContext, CheckKind, NotApplicable, Observation, PathNeed
from imagelint.checks.params import Param, ParamError, UnitGlobs, UnitSelection
from imagelint.facts.systemd.enablement import (
    DSH_STATE,
    ENABLED_STATES,
    distinct_units,
    enabling_links,
    recorded_by_package,
    unit_matches,
    wanting_unit,
)
from imagelint.facts.systemd.verify import unit_problems
from imagelint.records import dataclass

if TYPE_CHECKING:  # imported where used: rules that never touch units do not pay for them
    from imagelint.facts.systemd import Assignment, Unit, UnitIndex
    from imagelint.facts.systemd.execs import UnitCommands
    from imagelint.facts.systemd.manager import ManagerDefaults
    from imagelint.facts.systemd.presets import PresetRule

ARROW = " → "
U = TypeVar("U", bound=UnitSelection)


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


def unit_commands(ctx: CheckContext) -> UnitCommands:
    """The run's executables of every unit's commands, each found once (rules and inventory)."""
    from imagelint.facts.systemd.execs import UnitCommands

    return ctx.fact("systemd.commands", lambda: UnitCommands(ctx.target))


def unit_needs() -> list[PathNeed]:
    """What the unit index reads: unit files, presets, the manager's configuration and drop-ins, the
    package manager's enablement records, and what the unit files name."""
    from imagelint.facts.systemd.execs import DEFAULT_EXEC_PATH
    from imagelint.facts.systemd.manager import DROPIN_DIRS, MAIN
    from imagelint.facts.systemd.paths import PRESET_DIRS, RAW_SEARCH_PATH

    needs = [PathNeed(d, "tree-content") for d in (*RAW_SEARCH_PATH, *PRESET_DIRS, *DROPIN_DIRS, DSH_STATE)]
    needs += [PathNeed(MAIN), PathNeed("", "unit-references")]
    needs += [PathNeed(f"{d}/*", "metadata") for d in DEFAULT_EXEC_PATH]
    return needs


def inventory_needs() -> tuple[PathNeed, ...]:
    """What the inventory reads besides the units: a collector gathers it for a bundle's report."""
    from imagelint.facts import bootconfig, packages

    paths = [*bootconfig.OS_RELEASE, bootconfig.KERNEL_CMDLINE, bootconfig.DEFAULT_GRUB]
    paths += [f"{bootconfig.LOADER_ENTRIES}/*.conf", packages.DPKG_STATUS, *packages.RPMDB_PATHS]
    return tuple(PathNeed(p) for p in paths)


def image_inventory(ctx: CheckContext) -> dict[str, Any]:
    """The report's inventory (:mod:`imagelint.facts.inventory`) from this run's shared unit index
    and manager defaults: built after the rules, it reads only what they did not. On a live host
    (the target is the running system) the kernel command line of ``/proc/cmdline`` is included."""
    from imagelint.errors import ImageDamageError
    from imagelint.facts.inventory import build_inventory

    live = ctx.target.kind == "host"
    try:
        try:
            index: UnitIndex | None = unit_index(ctx)
        except NotApplicable:
            index = None
        defaults = _manager_defaults(ctx) if index is not None else None
        commands = unit_commands(ctx) if index is not None else None
        return build_inventory(ctx.target, index, defaults, live=live, commands=commands)
    except ImageDamageError:
        # the units cannot be listed in full: none are, and the target's account of the damage
        # marks the inventory incomplete (a diff on it is inconclusive)
        return build_inventory(ctx.target, None, None, live=live)


def _manager_defaults(ctx: CheckContext) -> ManagerDefaults:
    from imagelint.facts.systemd.manager import ManagerDefaults

    def build() -> ManagerDefaults:
        defaults = ManagerDefaults.load(ctx.target)
        for p in defaults.problems:
            ctx.warn(p.path if p.line is None else f"{p.path}:{p.line}", p.message)
        return defaults

    defaults: ManagerDefaults = ctx.fact("systemd.manager", build)
    return defaults


def boot_chain(ctx: CheckContext, index: UnitIndex, unit: Unit) -> list[str] | None:
    """The chain that starts ``unit`` at boot, or None: the index's, as ``imagelint units`` shows it."""
    return None if unit.boot_chain is None else list(unit.boot_chain)


def _selected(unit: Unit, params: UnitSelection) -> bool:
    if params.units and not unit_matches(unit, params.units):
        return False
    return not unit_matches(unit, params.exclude_units)


def _enabling_links(ctx: CheckContext, index: UnitIndex) -> dict[str, list[str]]:
    return ctx.fact("systemd.enabling_links", lambda: enabling_links(ctx.target, index))


def _base_evidence(ctx: CheckContext, index: UnitIndex, unit: Unit) -> dict[str, Any]:
    chain = boot_chain(ctx, index, unit)
    return {
        "state": unit.state,
        "preset": unit.preset,
        "chain": ARROW.join(chain) if chain else "not started at boot",
        "fragment": unit.fragment,
        "dropins": list(unit.dropins),
    }


class _UnitKind(CheckKind[U]):
    """Every image kind on units reads the unit index: unit directories, presets, system.conf,
    the package manager's enablement records, and what the unit files name (executables,
    EnvironmentFile=, condition paths) or find in the executable search path."""

    def paths(self, params: U) -> list[PathNeed]:
        return unit_needs()


@dataclass(frozen=True, kw_only=True)
class _NestingParams(UnitSelection):
    """Unit parameters that hold check specs of other kinds (a vendor configuration, observations)."""

    def calls(self) -> list[tuple[list[str | int], CheckCall]]:
        """The nested check specs, each with the path to it."""
        raise NotImplementedError


N = TypeVar("N", bound=_NestingParams)


class _NestingKind(_UnitKind[N]):
    """A unit kind that runs nested check specs: it reads what they read, and validates them."""

    def paths(self, params: N) -> list[PathNeed]:
        from imagelint.checks import registry

        needs = super().paths(params)
        for _, call in params.calls():
            needs += registry()[call.kind].paths(call.arguments)
        return needs

    def validate(self, params: N) -> None:
        from imagelint.checks import registry

        for at, call in params.calls():  # each was checked against its kind's schema when built
            if call.kind == self.name:
                raise ParamError(at, f"unknown check kind {call.kind!r}")
            try:
                registry()[call.kind].validate(call.arguments)
            except ParamError as exc:
                raise ParamError([*at, *exc.path], exc.message) from None


# -- the owner's intent ---------------------------------------------------------------------------


def config_missing(ctx: CheckContext, unit: Unit, configured: CheckCall) -> bool:
    """Whether the configuration ``unit`` needs (what the check spec ``configured`` finds) is missing
    from the image, as evidence that the unit fails.

    It is not when the check finds it. Nor is it when the owner declared both halves of the intent:
    the unit is in ``expected-units`` and a file the check reads is in ``provided-at-launch`` (it
    arrives with user data or a bootstrap); :meth:`CheckContext.explain` then says so, since the
    config changed the outcome. An unexpected unit gets no such allowance, and nothing else about the
    unit (a missing executable, what the journal or a live host shows) is weighed here.
    """
    if _run(ctx, configured):
        return False
    expected = ctx.settings.expected_units
    declared = _launch_declarations(ctx, configured) if expected and unit_matches(unit, expected) else []
    if not declared:
        return True
    verb = "is" if len(declared) == 1 else "are"
    ctx.explain(
        f"{unit.unit_id or unit.name}: {', '.join(declared)} {verb} provided at launch "
        "(config provided-at-launch)"
    )
    return False


def _launch_declarations(ctx: CheckContext, call: CheckCall) -> list[str]:
    """The ``provided-at-launch`` entries that name a file the check spec reads."""
    from imagelint.checks import registry

    reads = [need.glob for need in registry()[call.kind].paths(call.arguments)]
    return [d for d in ctx.settings.provided_at_launch if any(_globs_meet(d, r) for r in reads)]


def _globs_meet(a: str, b: str) -> bool:
    """Whether two absolute paths or globs name a common file: as many components, and at each the
    glob of one side matches the text of the other (``/etc/ecs/*`` meets ``/etc/ecs/ecs.config``)."""
    pa, pb = a.strip("/").split("/"), b.strip("/").split("/")
    return len(pa) == len(pb) and all(
        fnmatch.fnmatchcase(x, y) or fnmatch.fnmatchcase(y, x) for x, y in zip(pa, pb, strict=True)
    )


# -- image kinds ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class UnitEnabledParams(_NestingParams):
    units: UnitGlobs = field()  # required here: field() keeps the selection's default from being inherited
    reachable: Annotated[bool, Param("require the unit to be started at boot, not merely enabled")] = False
    configured: Annotated[
        CheckCall | None,
        Param(
            "a check spec that finds the units' configuration (e.g. file.contains): a unit fires only "
            "while it finds nothing, and not when the unit is expected and a file the check reads is "
            "provided at launch (config expected-units and provided-at-launch)"
        ),
    ] = None

    def calls(self) -> list[tuple[list[str | int], CheckCall]]:
        return [] if self.configured is None else [(["configured"], self.configured)]


@register
class UnitEnabled(_NestingKind[UnitEnabledParams]):
    name = "systemd.unit_enabled"
    summary = (
        "Fires for each matching unit that is enabled or started at boot (with `reachable: true`: only "
        "those started at boot, with the chain that pulls them in; with `configured`: only those whose "
        "configuration is missing); n/a if no unit matches."
    )
    parameters = UnitEnabledParams
    variables = {
        "unit": "the unit",
        "state": "enablement state (systemctl is-enabled)",
        "preset": "the image's preset verdict",
        "chain": "how it is started at boot (default.target → … → unit)",
        "fragment": "the unit file",
    }

    def evaluate(self, ctx: CheckContext, params: UnitEnabledParams) -> list[Observation]:
        index = unit_index(ctx)
        matching = [u for u in distinct_units(index) if _selected(u, params)]
        if not matching:
            raise NotApplicable(f"no unit matches {', '.join(params.units)}")
        found = []
        for unit in matching:
            chain = boot_chain(ctx, index, unit)
            enabled = unit.state in ENABLED_STATES
            if chain is None and (params.reachable or not enabled):
                continue
            if params.configured is not None and not config_missing(ctx, unit, params.configured):
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


@dataclass(frozen=True, kw_only=True)
class ExecMissingParams(UnitSelection):
    include_ignored: Annotated[
        bool, Param("also report '-'-prefixed commands (systemd ignores their failure, even 203/EXEC)")
    ] = False


@register
class ExecMissing(_UnitKind[ExecMissingParams]):
    name = "systemd.exec_missing"
    summary = (
        "Fires for each unit started at boot that would run an executable (Exec*=) or read an "
        "EnvironmentFile= that is not in the image, unless a condition evaluable offline skips it."
    )
    parameters = ExecMissingParams
    variables = {
        "unit": "the unit",
        "missing": "what is missing, with the setting and line",
        "chain": "how it is started at boot",
        "state": "enablement state",
    }

    def evaluate(self, ctx: CheckContext, params: ExecMissingParams) -> list[Observation]:
        from imagelint.facts.systemd import execs

        index = unit_index(ctx)
        include_ignored = params.include_ignored
        found = []
        for unit in distinct_units(index):
            if not _selected(unit, params) or unit.loaded is None or unit.loaded.status != "loaded":
                continue
            chain = boot_chain(ctx, index, unit)
            if chain is None:
                continue
            unit_id = unit.unit_id or unit.name
            if execs.skipped_by(execs.conditions(ctx.target, unit.assignments, unit_id)):
                continue
            problems, primary = execs.missing_files(
                ctx.target, unit, include_ignored, commands=unit_commands(ctx)
            )
            if primary is None:
                continue
            evidence = _base_evidence(ctx, index, unit)
            evidence["missing"] = "; ".join(problems)
            found.append(
                Observation(unit_id, path=primary.path, line=primary.line, unit=unit_id, evidence=evidence)
            )
        return found


@dataclass(frozen=True, kw_only=True)
class RestartUnboundedParams(UnitSelection):
    at_boot: Annotated[bool, Param("only units started at boot (reachable from default.target)")] = True


@register
class RestartUnbounded(_UnitKind[RestartUnboundedParams]):
    name = "systemd.restart_unbounded"
    summary = (
        "Fires for each service with Restart= whose RestartSec= and start limit (unit values, else the "
        "image's system.conf defaults) mean the start limit can never trip: it restarts forever."
    )
    parameters = RestartUnboundedParams
    variables = {
        "unit": "the unit",
        "restart": "the Restart= value",
        "restart_sec": "delay between restarts, and where it is set",
        "start_limit": "StartLimitBurst= in StartLimitIntervalSec=, and where they are set",
        "restarts_per_day": "restarts a day it allows (process run time counted as 0)",
        "why": "why the start limit can never trip",
        "chain": "how it is started at boot",
    }

    def evaluate(self, ctx: CheckContext, params: RestartUnboundedParams) -> list[Observation]:
        index = unit_index(ctx)
        found = []
        for unit in distinct_units(index):
            if not _selected(unit, params):
                continue
            if params.at_boot and boot_chain(ctx, index, unit) is None:
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
    from imagelint.facts.systemd.restart import restart_policy

    policy = restart_policy(unit, _manager_defaults(ctx))
    if policy is None:
        return None
    for where, message in policy.warnings:
        ctx.warn(where, message)
    if policy.never_trips is None:
        return None
    a, sec = policy.restart, policy.restart_sec
    from imagelint.facts.systemd.timespan import format_seconds

    return a, {
        "restart": a.value,
        "restart_sec": f"{format_seconds(sec.value)} ({sec.source})",
        "start_limit": policy.start_limit,
        "restarts_per_day": policy.restarts_per_day,
        "why": policy.never_trips,
        "restart_summary": (
            f"Restart={a.value}, RestartSec={sec.text}: up to {policy.restarts_per_day} restarts a day"
        ),
    }


@dataclass(frozen=True, kw_only=True)
class UnexpectedParams(UnitSelection):
    package_records: Annotated[
        bool, Param("count units that Debian's deb-systemd-helper recorded as enabled by a package")
    ] = True


@register
class UnitUnexpected(_UnitKind[UnexpectedParams]):
    name = "systemd.unit_unexpected"
    summary = (
        "Fires for each unit started at boot that was enabled (not static or indirect) although it is "
        "neither in the config's expected-units, nor enabled by a preset rule of the image, nor "
        "recorded by the package manager's enablement (Debian's deb-systemd-helper)."
    )
    parameters = UnexpectedParams
    variables = {
        "unit": "the unit",
        "state": "enablement state",
        "preset": "the image's preset verdict",
        "preset_rule": "the preset rule that matches, or that none does",
        "enabled_by": "the symlinks that enable it",
        "chain": "how it is started at boot",
    }

    def evaluate(self, ctx: CheckContext, params: UnexpectedParams) -> list[Observation]:
        index = unit_index(ctx)
        expected = ctx.settings.expected_units
        links = _enabling_links(ctx, index)
        found = []
        for unit in distinct_units(index):
            if not _selected(unit, params) or not _unexpected(ctx, index, unit, params):
                continue
            rule = _preset_rule(index, unit)
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


def _preset_rule(index: UnitIndex, unit: Unit) -> PresetRule | None:
    """The image's preset rule for the unit, or for its template."""
    from imagelint.facts.systemd import names

    template = names.template_of(unit.name)
    return index.presets.rule_for(unit.name) or (index.presets.rule_for(template) if template else None)


def _unexpected(ctx: CheckContext, index: UnitIndex, unit: Unit, params: UnexpectedParams) -> bool:
    """Enabled, started at boot, and declared by nobody (config, preset, package manager)."""
    if unit.state not in ENABLED_STATES or boot_chain(ctx, index, unit) is None:
        return False
    expected = ctx.settings.expected_units
    if expected and unit_matches(unit, expected):
        return False
    rule = _preset_rule(index, unit)
    if rule is not None and rule.enable:
        return False
    return not (params.package_records and recorded_by_package(ctx.target, unit))


@dataclass(frozen=True, kw_only=True)
class BrokenParams(UnitSelection):
    at_boot: Annotated[bool, Param("only units started at boot or enabled")] = False
    not_at_boot: Annotated[
        bool, Param("only units neither started at boot nor enabled (the complement of at_boot)")
    ] = False
    problems: Annotated[
        bool, Param("also report the unit index's problems (unreadable files, link loops...)")
    ] = True


@register
class UnitBroken(_UnitKind[BrokenParams]):
    name = "systemd.unit_broken"
    summary = (
        "Fires for what systemd-analyze verify would refuse: unknown sections, a service without a "
        "required ExecStart=, Requires=/Requisite=/BindsTo= on units that do not exist, and every "
        "unit file or link the index could not read or understand."
    )
    parameters = BrokenParams
    variables = {
        "unit": "the unit (if any)",
        "where": "the unit, or the file or link the problem is about",
        "problem": "what is wrong",
        "chain": "how it is started at boot",
    }

    def evaluate(self, ctx: CheckContext, params: BrokenParams) -> list[Observation]:
        index = unit_index(ctx)
        found: list[Observation] = []
        for unit in distinct_units(index):
            if (
                not _selected(unit, params)
                or unit.loaded is None
                or unit.loaded.status not in ("loaded", "error")
            ):
                continue
            chain = boot_chain(ctx, index, unit)
            live = chain is not None or unit.state in ENABLED_STATES
            if (params.at_boot and not live) or (params.not_at_boot and live):
                continue
            unit_id = unit.unit_id or unit.name
            for path, line, problem in unit_problems(index, unit):
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
        if params.problems and not params.units:
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


@dataclass(frozen=True, kw_only=True)
class EnabledNotStartedParams(UnitSelection):
    exclude_targets: Annotated[
        tuple[str, ...],
        Param("globs of targets started on demand (by udev, logind, shutdown...), not at boot"),
    ] = ()


@register
class EnabledNeverStarted(_UnitKind[EnabledNotStartedParams]):
    name = "systemd.enabled_not_started"
    summary = (
        "Fires for each unit enabled (linked into a .wants/, .requires/ or .upholds/ directory) only "
        "into targets that nothing pulls in at boot, so it is enabled yet never started."
    )
    parameters = EnabledNotStartedParams
    variables = {
        "unit": "the unit",
        "targets": "the units it is enabled into, none of them started at boot",
        "enabled_by": "the symlinks that enable it",
        "state": "enablement state",
    }

    def evaluate(self, ctx: CheckContext, params: EnabledNotStartedParams) -> list[Observation]:
        index = unit_index(ctx)
        links = _enabling_links(ctx, index)
        skip = params.exclude_targets
        found = []
        for unit in distinct_units(index):
            if unit.state not in ENABLED_STATES or unit.boot_chain is not None or not _selected(unit, params):
                continue
            enabled_by = [p for n in (unit.name, *unit.aliases) for p in links.get(n, [])]
            wanting = list(dict.fromkeys(wanting_unit(link) for link in enabled_by))
            if not wanting or any(fnmatch.fnmatchcase(t, g) for t in wanting for g in skip):
                continue
            unit_id = unit.unit_id or unit.name
            evidence = _base_evidence(ctx, index, unit)
            evidence.update({"targets": ", ".join(wanting), "enabled_by": ", ".join(enabled_by)})
            found.append(Observation(unit_id, path=enabled_by[0], unit=unit_id, evidence=evidence))
        return found


_CHECK_SPEC = "a check spec: {kind: ..., params}"


@dataclass(frozen=True, kw_only=True)
class VendorConfig:
    units: Annotated[tuple[str, ...], Param("unit name globs of the units that need the configuration")]
    unless: Annotated[CheckCall, Param(_CHECK_SPEC)]
    reason: Annotated[str, Param("what is missing, as evidence that the unit fails")]


@dataclass(frozen=True, kw_only=True)
class ObservedEvidence:
    check: Annotated[CheckCall, Param(_CHECK_SPEC)]
    reason: Annotated[str, Param("the evidence, formatted with the observation's variables")]


@dataclass(frozen=True, kw_only=True)
class BootFailureLoopParams(_NestingParams):
    unexpected: Annotated[
        bool, Param("count 'enabled but not expected' (as systemd.unit_unexpected) as evidence")
    ] = True
    vendor_config: Annotated[
        tuple[VendorConfig, ...],
        Param(
            "configuration a unit needs: where `unless` (a check spec, e.g. file.contains) finds nothing, "
            "`reason` is evidence that the unit fails (not for an expected unit when a file the check "
            "reads is provided at launch: config expected-units and provided-at-launch)"
        ),
    ] = ()
    observed: Annotated[
        tuple[ObservedEvidence, ...],
        Param(
            "check specs whose observations of a unit (journal, live) are evidence; `reason` is "
            "formatted with the observation's variables"
        ),
    ] = ()

    def calls(self) -> list[tuple[list[str | int], CheckCall]]:
        calls: list[tuple[list[str | int], CheckCall]] = [
            (["vendor_config", i, "unless"], v.unless) for i, v in enumerate(self.vendor_config)
        ]
        return calls + [(["observed", i, "check"], o.check) for i, o in enumerate(self.observed)]


@register
class BootFailureLoop(_NestingKind[BootFailureLoopParams]):
    name = "systemd.boot_failure_loop"
    summary = (
        "Fires for each service that is started at boot, will fail (evidence: an executable or "
        "required file missing, a vendor configuration missing, enabled without being expected, "
        "failures or restart loops in the journal or on the live host) and restarts forever; "
        "one observation names every piece of evidence."
    )
    parameters = BootFailureLoopParams
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

    def evaluate(self, ctx: CheckContext, params: BootFailureLoopParams) -> list[Observation]:
        from imagelint.facts.systemd import execs

        index = unit_index(ctx)
        observed = self._observed(ctx, params)
        found = []
        for unit in distinct_units(index):
            chain = boot_chain(ctx, index, unit)
            if chain is None or not _selected(unit, params):
                continue
            loop = _restart_loop(ctx, unit)
            if loop is None:
                continue
            unit_id = unit.unit_id or unit.name
            if execs.skipped_by(execs.conditions(ctx.target, unit.assignments, unit_id)):
                continue  # a condition evaluable offline skips it: it does not start, so does not fail
            missing, _primary = execs.missing_files(ctx.target, unit, commands=unit_commands(ctx))
            failure = list(missing)
            for entry in params.vendor_config:
                if unit_matches(unit, entry.units) and config_missing(ctx, unit, entry.unless):
                    failure.append(entry.reason)
            if params.unexpected and _unexpected(ctx, index, unit, UnexpectedParams()):
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
    def _observed(ctx: CheckContext, params: BootFailureLoopParams) -> dict[str, list[str]]:
        """unit -> reasons, from the observations of the `observed` checks (absent data: none)."""
        out: dict[str, list[str]] = {}
        for entry in params.observed:
            for obs in _run(ctx, entry.check, optional=True):
                if obs.unit:
                    out.setdefault(obs.unit, []).append(entry.reason.format_map(_Dashed(obs.variables())))
        return out


class _Dashed(dict[str, Any]):
    """Template variables; one the observation lacks renders as '-' (as in rule messages)."""

    def __missing__(self, key: str) -> str:
        return "-"


def _run(ctx: CheckContext, call: CheckCall, *, optional: bool = False) -> list[Observation]:
    """The observations of a check spec (the same kinds rule conditions use); none if n/a. With
    ``optional``, data that cannot be had (no journal, no live systemd) is no evidence either: the
    rules that read it report that themselves."""
    from imagelint.checks import registry
    from imagelint.errors import ImageLintError

    try:
        return registry()[call.kind].evaluate(ctx, call.arguments)
    except NotApplicable:
        return []
    except ImageLintError:
        if optional:
            return []
        raise
