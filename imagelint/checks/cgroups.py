"""Check kinds on a soak's measurements: memory-cgroup growth, ceilings, ratio, restarts, the walk's cost.

They read the soak's measurements (:class:`~imagelint.facts.soak.SoakFacts`, a data source that
``imagelint soak`` supplies) and are not applicable without it, or when the
host has no memory controller to count.
"""

from __future__ import annotations

from typing import Any

from imagelint.checks import register
from imagelint.checks.base import CheckContext, CheckKind, NotApplicable, Observation
from imagelint.facts.soak import SoakFacts

_SERIES = {"series": {"enum": ["dying", "live"], "default": "dying", "description": "which count"}}


def _soak(ctx: CheckContext) -> SoakFacts:
    soak = ctx.source(SoakFacts)
    if soak is None:
        raise NotApplicable("no soak measurements in this run (use `imagelint soak`)")
    if not soak.has_memory_counts:
        raise NotApplicable(f"no memory cgroup counts on this host: {soak.layout.note or soak.layout.kind}")
    return soak


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


@register
class CgroupGrowth(CheckKind):
    name = "cgroup.growth"
    summary = "Fires when a memory-cgroup count grows significantly (Theil–Sen slope, Mann–Kendall test)."
    parameters = {
        **_SERIES,
        "min_per_hour": {"type": "number", "minimum": 0, "description": "slope at or above which it fires"},
        "alpha": {"type": "number", "exclusiveMinimum": 0, "maximum": 0.5, "default": 0.01},
        "projection_days": {"type": "number", "exclusiveMinimum": 0, "default": 30},
        "min_increases": {
            "type": "integer",
            "minimum": 1,
            "default": 3,
            "description": "rises between samples needed: a leak rises in many steps, a burst in one",
        },
    }
    required = ("min_per_hour",)
    variables = {
        "series": "dying or live",
        "slope_per_hour": "Theil–Sen slope, per hour",
        "delta": "change over the soak",
        "p_value": "Mann–Kendall p-value",
        "projection": "'at this rate: N in D days'",
        "attribution": "units that restarted and subtrees that grew in the same window",
        "minutes": "length of the soak in minutes",
    }

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        from imagelint.facts.trend import projection_text

        soak = _soak(ctx)
        series = params.get("series", "dying")
        trend = soak.result.trend(series, alpha=params.get("alpha", 0.01))
        if trend is None:
            raise NotApplicable("fewer than 3 samples: the soak was too short to judge a trend")
        steady = trend.increases >= params.get("min_increases", 3)
        if not (trend.growing and steady and trend.slope_per_hour >= params["min_per_hour"]):
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
            "projection": projection_text(
                trend.last, trend.slope_per_hour, days=params.get("projection_days", 30)
            ),
            "attribution": _attribution(soak, delta),
        }
        return [Observation(f"memory-cgroups:{series}", evidence=evidence)]


@register
class CgroupDyingCount(CheckKind):
    name = "cgroup.dying_count"
    summary = "Fires when the number of dying memory cgroups at the end of the soak is above a ceiling."
    parameters = {"max": {"type": "integer", "minimum": 0, "description": "highest acceptable count"}}
    required = ("max",)
    variables = {"dying": "dying memory cgroups", "live": "live memory cgroups", "max": "the ceiling"}

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        last = _soak(ctx).result.samples[-1]
        if last.dying <= params["max"]:
            return []
        evidence = {"dying": last.dying, "live": last.live, "max": params["max"]}
        return [Observation("memory-cgroups:dying", evidence=evidence)]


@register
class CgroupDyingRatio(CheckKind):
    name = "cgroup.dying_ratio"
    summary = "Fires when dying : live memory cgroups at the end of the soak is above a ceiling."
    parameters = {
        "max_ratio": {"type": "number", "minimum": 0},
        "min_dying": {"type": "integer", "minimum": 0, "default": 100, "description": "ignore tiny counts"},
    }
    required = ("max_ratio",)
    variables = {"ratio": "dying : live", "dying": "dying", "live": "live", "max_ratio": "the ceiling"}

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        soak = _soak(ctx)
        ratio, last = soak.result.ratio(), soak.result.samples[-1]
        if ratio is None or last.dying < params.get("min_dying", 100) or ratio <= params["max_ratio"]:
            return []
        evidence = {
            "ratio": round(ratio, 1),
            "dying": last.dying,
            "live": last.live,
            "max_ratio": params["max_ratio"],
        }
        return [Observation("memory-cgroups:ratio", evidence=evidence)]


@register
class UnitRestartsDuringSoak(CheckKind):
    name = "soak.unit_restarts"
    summary = "Fires for each service whose NRestarts rose by at least N during the soak (systemctl show)."
    parameters = {"min_restarts": {"type": "integer", "minimum": 1}}
    required = ("min_restarts",)
    variables = {"restarts": "restarts during the soak", "minutes": "length of the soak in minutes"}

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        soak = ctx.source(SoakFacts)
        if soak is None:
            raise NotApplicable("no soak measurements in this run (use `imagelint soak`)")
        start = soak.result.restarts_start
        if start is None or not start.available:
            raise NotApplicable(f"restart counters unavailable: {start.reason if start else 'not collected'}")
        minutes = round(soak.result.elapsed / 60, 1)
        return [
            Observation(d.unit, unit=d.unit, evidence={"restarts": d.restarts, "minutes": minutes})
            for d in soak.result.restart_deltas()
            if d.restarts is not None and d.restarts >= params["min_restarts"]
        ]


@register
class MemoryStatWalk(CheckKind):
    name = "cgroup.walk_time"
    summary = "Fires when reading every live memory cgroup's memory.stat (kubelet's walk) takes too long."
    parameters = {"max_seconds": {"type": "number", "exclusiveMinimum": 0}}
    required = ("max_seconds",)
    variables = {"seconds": "the walk at the end", "start_seconds": "at the start", "cgroups": "cgroups read"}

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        soak = _soak(ctx)
        end, start = soak.walk_end, soak.walk_start
        if end is None:
            raise NotApplicable("the memory.stat walk was not measured")
        if end.seconds <= params["max_seconds"]:
            return []
        evidence = {
            "seconds": round(end.seconds, 3),
            "start_seconds": round(start.seconds, 3) if start else None,
            "cgroups": end.cgroups,
        }
        return [Observation("memory-cgroups:walk", evidence=evidence)]
