"""Check kind on a soak's per-CPU reads: a core saturated in the kernel while the others' kernel time is low.

``cpu.hot_core`` replays the soak's ``/proc/stat`` reads (:class:`imagelint.facts.cpurecord.CpuRecord`)
through the episode tracker of :mod:`imagelint.facts.hotcore` with the rule's thresholds, and fires
when a CPU stayed saturated for at least ``min_seconds``. Its ``evidence`` parameter names what else
points at the incident's mechanism (dying memcgs growing as IL401 judges them; a slow memory.stat
walk), and ``require`` splits one problem between two rules by that evidence: ``alone`` fires only
without it, ``accompanied`` only with it, so each hot core gives one finding at the severity its
evidence supports, and the verdict stays with the one verdict function.

``max_others_busy`` (the others' busy share, any time) was replaced by ``max_others_kernel_share``
(issue 49: a hot core beside cores busy in user time went unseen). Packs that still set the old key
keep validating: it is read as ``max_others_kernel_share`` (a bound on the others' busy share was
also one on their kernel share, so the rule only loosens as the fix intends) with a warning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from imagelint.checks import register
from imagelint.checks.base import CheckContext, CheckKind, NotApplicable, Observation
from imagelint.checks.cgroups import CgroupGrowth, GrowthParams, soak_facts
from imagelint.checks.params import Param
from imagelint.facts.hotcore import MAX_EPISODES, HotCoreParams, summarise
from imagelint.records import dataclass

if TYPE_CHECKING:
    from imagelint.facts.soak import SoakFacts


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """What else counts as evidence of the incident's mechanism."""

    dying_growth_per_hour: Annotated[
        float | None, Param("dying memcgs growing at least this fast (cgroup.growth, as IL401)", minimum=0)
    ] = None
    walk_seconds: Annotated[
        float | None,
        Param("any memory.stat walk of the soak at least this slow (as IL406)", exclusiveMinimum=0),
    ] = None
    ena_reset: Annotated[
        bool,
        Param("an ENA reset in the host's journal whose NAPI handler ran on the hot CPU (its last boot)"),
    ] = False


@dataclass(frozen=True, kw_only=True)
class HotCoreRuleParams:
    min_seconds: Annotated[float, Param("shortest episode that counts", exclusiveMinimum=0)]
    min_kernel_share: Annotated[float, Param("kernel share of the hot CPU", minimum=0, maximum=1)] = (
        HotCoreParams.min_kernel_share
    )
    max_others_kernel_share: Annotated[
        float,
        Param("kernel share of the other CPUs (their user time does not count)", minimum=0, maximum=1),
    ] = HotCoreParams.max_others_kernel_share
    max_others_busy: Annotated[
        float | None,
        Param("deprecated: read as max_others_kernel_share (a warning says so)", minimum=0, maximum=1),
    ] = None
    window_seconds: Annotated[
        float, Param("shares are judged over a trailing window (ticks are 10 ms)", minimum=0.1)
    ] = HotCoreParams.window_seconds
    evidence: Annotated[Evidence, Param("what else counts as evidence of the incident's mechanism")] = (
        Evidence()
    )
    require: Annotated[
        Literal["any", "alone", "accompanied"],
        Param("fire regardless, only without evidence, or only with it"),
    ] = "any"

    def thresholds(self) -> HotCoreParams:
        """The episode tracker's thresholds (the deprecated key stands in for the new one left at its
        default)."""
        others = self.max_others_kernel_share
        if self.max_others_busy is not None and others == HotCoreParams.max_others_kernel_share:
            others = self.max_others_busy
        return HotCoreParams(
            min_kernel_share=self.min_kernel_share,
            max_others_kernel_share=others,
            window_seconds=self.window_seconds,
        )


@register
class HotCore(CheckKind[HotCoreRuleParams]):
    name = "cpu.hot_core"
    summary = (
        "Fires when one CPU spent at least min_kernel_share of its time in the kernel (system + irq + "
        "softirq) for min_seconds in a row while the other CPUs' kernel share was at most "
        "max_others_kernel_share, whatever their user time."
    )
    parameters = HotCoreRuleParams
    variables = {
        "cpus": "the CPUs with episodes, e.g. cpu0, cpu3",
        "longest_seconds": "the longest episode, in seconds",
        "longest_cpu": "the CPU of the longest episode",
        "count": "episodes of at least min_seconds",
        "min_seconds": "the shortest episode that counts (the parameter)",
        "saturated": "saturated seconds per CPU, over all episodes",
        "kernel_share": "the longest episode's kernel share over its whole length, in percent",
        "others_kernel": "the other CPUs' highest kernel share during it, in percent",
        "others_busy": "the other CPUs' highest busy share (user time too) during it, in percent",
        "average_busy": "the all-CPU average at its highest during it, in percent",
        "walk_trend": "the memory.stat walk's timings through the soak",
        "accompanied": "the other evidence found ('no other evidence' when none)",
        "nic": "where the NIC queues' interrupts landed during the soak",
        "ena": "the ENA resets of the journal's last boot whose NAPI handler ran on a hot CPU",
    }

    def evaluate(self, ctx: CheckContext, params: HotCoreRuleParams) -> list[Observation]:
        if params.max_others_busy is not None:
            ctx.warn(
                "cpu.hot_core",
                "max_others_busy is deprecated: it is read as max_others_kernel_share (the other CPUs' "
                "user time no longer counts); rename it",
            )
        from imagelint.facts.cpustat import ProcStatError  # here: an offline audit never reads /proc/stat

        soak = soak_facts(ctx)
        record = soak.cpu
        if record is None:  # every Linux host has /proc/stat: not read is a gap, never "not applicable"
            raise ProcStatError(
                f"per-CPU time was not read: {soak.cpu_note or 'no reads'}", where="/proc/stat"
            )
        if record.error:
            raise ProcStatError(f"per-CPU reads failed during the soak: {record.error}", where="/proc/stat")
        if record.truncated_at is not None:
            ctx.gap(
                "/proc/stat", f"per-CPU reads after {record.truncated_at:.0f} s were not kept (memory cap)"
            )
        thresholds = params.thresholds()
        hot = ctx.fact(
            ("cpu.hot_core", thresholds, params.min_seconds),
            lambda: summarise(record.tracker(thresholds), params.min_seconds),
        )
        if not hot.complete:
            ctx.gap("/proc/stat", f"more than {MAX_EPISODES:,} hot-core episodes; not all were kept")
        if not hot.episodes:
            return []
        ena = _ena_resets_on(ctx, set(hot.cpus))
        reasons = _evidence(ctx, soak, params.evidence)
        if params.evidence.ena_reset and ena[0]:
            reasons.append(ena[1])
        require = params.require
        if (require == "alone" and reasons) or (require == "accompanied" and not reasons):
            return []
        longest = hot.longest
        assert longest is not None
        nic = soak.nic_interrupts.text(hot.cpus) if soak.nic_interrupts else "NIC interrupts not read"
        evidence = {
            "cpus": ", ".join(f"cpu{c}" for c in hot.cpus),
            "longest_seconds": round(longest.seconds, 1),
            "longest_cpu": f"cpu{longest.cpu}",
            "count": hot.count,
            "min_seconds": params.min_seconds,
            "saturated": ", ".join(f"cpu{c} {hot.saturated_seconds.get(c, 0.0):.1f} s" for c in hot.cpus),
            "kernel_share": round(100 * longest.kernel_share),
            "others_kernel": round(100 * longest.max_others_kernel_share),
            "others_busy": round(100 * longest.max_others_busy),
            "average_busy": round(100 * longest.max_average_busy),
            "walk_trend": soak.walks.trend_text(),
            "accompanied": "; ".join(reasons) or "no other evidence",
            "nic": nic,
            "ena": ena[1],
            "episodes": hot.to_dict(record.origin)["episodes"],
        }
        return [Observation("cpu:hot-core", evidence=evidence)]


def _evidence(ctx: CheckContext, soak: SoakFacts, wanted: Evidence) -> list[str]:
    """Each piece of other evidence found, in words (data that is not there is no evidence)."""
    reasons = []
    if wanted.dying_growth_per_hour is not None:
        spec = GrowthParams(series="dying", min_per_hour=wanted.dying_growth_per_hour)
        try:
            growth = CgroupGrowth().evaluate(ctx, spec)
        except NotApplicable:
            growth = []
        for obs in growth:
            e = obs.evidence
            reasons.append(f"dying memory cgroups grow by {e['slope_per_hour']}/hour (+{e['delta']})")
    slowest = soak.walks.slowest()
    if wanted.walk_seconds is not None and slowest is not None and slowest.seconds >= wanted.walk_seconds:
        reasons.append(f"a memory.stat walk of {slowest.cgroups:,} cgroups took {slowest.seconds:.2f} s")
    return reasons


def _ena_resets_on(ctx: CheckContext, cpus: set[int]) -> tuple[bool, str]:
    """(found, in words) the ENA resets of the journal's last boot whose NAPI handler ran on one of
    ``cpus``: the symptom the hot core starves, named by the driver itself (2.17.0 and later print
    the NAPI CPU). A journal that is not there is no evidence; one that is there and not read in full
    is a gap (the rule cannot pass on it)."""
    from imagelint.checks.journal import journal_gaps, journal_of
    from imagelint.facts.journal import analyze_ena_resets

    try:
        journal = journal_of(ctx)
    except NotApplicable as exc:
        return False, f"no ENA reset read ({exc.reason})"
    journal_gaps(ctx, journal)  # an unread file may hold the reset that decides IL407 from IL408
    resets = ctx.fact(("journal.ena_resets", 60.0), lambda: analyze_ena_resets(journal, gap=60.0)).resets()
    last_boot = resets[-1].boot_id if resets else None
    named = [e for e in resets if e.boot_id == last_boot and e.napi_cpus & cpus]
    if not named:
        return False, "no ENA reset in the journal names a hot CPU as its NAPI CPU"
    parts = [
        f"ENA {e.device} reset{'' if e.completed else ' (not completed)'} with queue(s) "
        f"{', '.join(str(q) for q in sorted(e.queues)) or '?'} on NAPI CPU(s) "
        f"{', '.join(f'cpu{c}' for c in sorted(e.napi_cpus & cpus))}"
        for e in named
    ]
    return True, "; ".join(parts)
