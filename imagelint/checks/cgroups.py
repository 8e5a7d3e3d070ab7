"""Check kinds on a soak's measurements: memory-cgroup growth, ceilings, ratio, restarts, the walk's cost.

They read the soak's measurements (:class:`~imagelint.facts.soak.SoakFacts`, a data source that
``imagelint soak`` supplies) and are not applicable without it, or when the
host has no memory controller to count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from imagelint.checks import register
from imagelint.checks.base import CheckContext, CheckKind, NotApplicable, Observation
from imagelint.checks.params import Param
from imagelint.errors import ImageReadError
from imagelint.records import dataclass

if TYPE_CHECKING:
    from imagelint.facts.soak import SoakFacts


def soak_facts(ctx: CheckContext) -> SoakFacts:
    """The soak's measurements; not applicable in a run without them."""
    from imagelint.facts.soak import SoakFacts  # here: a run without a soak never evaluates these kinds

    soak = ctx.source(SoakFacts)
    if soak is None:
        raise NotApplicable("no soak measurements in this run (use `imagelint soak`)")
    return soak


def _soak(ctx: CheckContext) -> SoakFacts:
    """The soak's measurements with memory cgroup counts. A kernel without a memory controller has no
    memory cgroups to leak (not applicable); one that has it and was not counted is missing data the
    soak needed: inconclusive, as ``audit --live`` is when it cannot read the host."""
    soak = soak_facts(ctx)
    if not soak.has_memory_counts:
        why = soak.layout.note or soak.layout.kind
        if not soak.layout.memory_enabled:
            raise NotApplicable(f"no memory cgroup counts on this host: {why}")
        raise ImageReadError("/proc/cgroups", f"memory cgroups were not counted: {why}")
    return soak


def _dying_at_end(soak: SoakFacts) -> int:
    dying = soak.result.samples[-1].dying
    assert dying is not None  # _soak: the host counts memory cgroups
    return dying


def _attribution(soak: SoakFacts, delta: float) -> str:
    from imagelint.facts.systemd.show import attribution_text

    text = attribution_text(delta, soak.result.restart_deltas())
    if soak.journal_restarts:
        named = ", ".join(f"{unit} {n}" for unit, n in list(soak.journal_restarts.items())[:3])
        text += f"; the journal logged restarts in the same window: {named}"
    subtrees = soak.growing_subtrees()
    if subtrees:
        text += "; growing subtrees: " + ", ".join(f"{p} +{n}" for p, n in subtrees)
    return text


@dataclass(frozen=True, kw_only=True)
class GrowthParams:
    series: Annotated[Literal["dying", "live"], Param("which count")] = "dying"
    min_per_hour: Annotated[float, Param("slope at or above which it fires", minimum=0)]
    alpha: Annotated[
        float, Param("significance level of the Mann–Kendall test", exclusiveMinimum=0, maximum=0.5)
    ] = 0.01
    projection_days: Annotated[
        float, Param("days ahead the projection looks, at the slope found", exclusiveMinimum=0)
    ] = 30
    min_increases: Annotated[
        int, Param("rises between samples needed: a leak rises in many steps, a burst in one", minimum=1)
    ] = 3


@register
class CgroupGrowth(CheckKind[GrowthParams]):
    name = "cgroup.growth"
    summary = "Fires when a memory-cgroup count grows significantly (Theil–Sen slope, Mann–Kendall test)."
    parameters = GrowthParams
    variables = {
        "series": "dying or live",
        "slope_per_hour": "Theil–Sen slope, per hour",
        "delta": "change over the soak",
        "p_value": "Mann–Kendall p-value",
        "projection": "'at this rate: N in D days'",
        "attribution": "units that restarted and subtrees that grew in the same window",
        "minutes": "length of the soak in minutes",
    }

    def evaluate(self, ctx: CheckContext, params: GrowthParams) -> list[Observation]:
        from imagelint.facts.trend import projection_text

        soak = _soak(ctx)
        series = params.series
        trend = soak.result.trend(series, alpha=params.alpha)
        if trend is None:
            raise NotApplicable("fewer than 3 samples: the soak was too short to judge a trend")
        steady = trend.increases >= params.min_increases
        if not (trend.growing and steady and trend.slope_per_hour >= params.min_per_hour):
            return []
        delta = trend.last - trend.first
        evidence = {
            "series": series,
            "slope_per_hour": round(trend.slope_per_hour, 1),
            "slope_ci_per_hour": [round(trend.ci_low_per_hour, 1), round(trend.ci_high_per_hour, 1)],
            "delta": int(delta),
            "p_value": float(f"{trend.p_value:.3g}"),
            "samples": trend.n,
            "minutes": round(trend.span_seconds / 60, 1),
            "projection": projection_text(trend.last, trend.slope_per_hour, days=params.projection_days),
            "attribution": _attribution(soak, delta),
        }
        return [Observation(f"memory-cgroups:{series}", evidence=evidence)]


@dataclass(frozen=True, kw_only=True)
class DyingCountParams:
    max: Annotated[int, Param("highest acceptable count", minimum=0)]


@register
class CgroupDyingCount(CheckKind[DyingCountParams]):
    name = "cgroup.dying_count"
    summary = "Fires when the number of dying memory cgroups at the end of the soak is above a ceiling."
    parameters = DyingCountParams
    variables = {"dying": "dying memory cgroups", "live": "live memory cgroups", "max": "the ceiling"}

    def evaluate(self, ctx: CheckContext, params: DyingCountParams) -> list[Observation]:
        soak = _soak(ctx)
        dying = _dying_at_end(soak)
        if dying <= params.max:
            return []
        evidence = {"dying": dying, "live": soak.result.samples[-1].live, "max": params.max}
        return [Observation("memory-cgroups:dying", evidence=evidence)]


@dataclass(frozen=True, kw_only=True)
class DyingRatioParams:
    max_ratio: Annotated[float, Param("highest acceptable dying : live ratio", minimum=0)]
    min_dying: Annotated[int, Param("ignore tiny counts", minimum=0)] = 100


@register
class CgroupDyingRatio(CheckKind[DyingRatioParams]):
    name = "cgroup.dying_ratio"
    summary = "Fires when dying : live memory cgroups at the end of the soak is above a ceiling."
    parameters = DyingRatioParams
    variables = {"ratio": "dying : live", "dying": "dying", "live": "live", "max_ratio": "the ceiling"}

    def evaluate(self, ctx: CheckContext, params: DyingRatioParams) -> list[Observation]:
        soak = _soak(ctx)
        ratio, dying = soak.result.ratio(), _dying_at_end(soak)
        if ratio is None or dying < params.min_dying or ratio <= params.max_ratio:
            return []
        evidence = {
            "ratio": round(ratio, 1),
            "dying": dying,
            "live": soak.result.samples[-1].live,
            "max_ratio": params.max_ratio,
        }
        return [Observation("memory-cgroups:ratio", evidence=evidence)]


@dataclass(frozen=True, kw_only=True)
class SoakRestartsParams:
    min_restarts: Annotated[int, Param("restarts during the soak at or above which it fires", minimum=1)]


@register
class UnitRestartsDuringSoak(CheckKind[SoakRestartsParams]):
    name = "soak.unit_restarts"
    summary = "Fires for each service whose NRestarts rose by at least N during the soak (systemctl show)."
    parameters = SoakRestartsParams
    variables = {"restarts": "restarts during the soak", "minutes": "length of the soak in minutes"}

    def evaluate(self, ctx: CheckContext, params: SoakRestartsParams) -> list[Observation]:
        soak = soak_facts(ctx)
        snapshots = (soak.result.restarts_start, soak.result.restarts_end)  # both ends are needed
        for snapshot in snapshots:
            if snapshot is not None and not snapshot.available and snapshot.booted:
                # a manager ran and did not answer: missing data, never "not applicable"
                raise ImageReadError("systemctl show", f"restart counters unavailable: {snapshot.reason}")
        for snapshot in snapshots:
            if snapshot is None:
                raise NotApplicable("restart counters were not collected")
            if not snapshot.available:
                raise NotApplicable(f"no systemd manager runs on this host: {snapshot.reason}")
        minutes = round(soak.result.elapsed / 60, 1)
        return [
            Observation(d.unit, unit=d.unit, evidence={"restarts": d.restarts, "minutes": minutes})
            for d in soak.result.restart_deltas()
            if d.restarts is not None and d.restarts >= params.min_restarts
        ]


@dataclass(frozen=True, kw_only=True)
class WalkTimeParams:
    max_seconds: Annotated[float, Param("longest acceptable walk at the end of the soak", exclusiveMinimum=0)]


@register
class MemoryStatWalk(CheckKind[WalkTimeParams]):
    name = "cgroup.walk_time"
    summary = "Fires when reading every live memory cgroup's memory.stat (kubelet's walk) takes too long."
    parameters = WalkTimeParams
    variables = {"seconds": "the walk at the end", "start_seconds": "at the start", "cgroups": "cgroups read"}

    def evaluate(self, ctx: CheckContext, params: WalkTimeParams) -> list[Observation]:
        soak = _soak(ctx)
        end, start = soak.walk_end, soak.walk_start
        if end is None:  # the host counts memory cgroups (_soak), so the walk was due
            raise ImageReadError("memory.stat walk", "not timed at the end of the soak")
        if end.seconds <= params.max_seconds:
            return []
        evidence = {
            "seconds": round(end.seconds, 3),
            "start_seconds": round(start.seconds, 3) if start else None,
            "cgroups": end.cgroups,
        }
        return [Observation("memory-cgroups:walk", evidence=evidence)]
