"""The soak-scope rules (IL4xx), judged over the watch window: ``imagelint_verdict`` per rule.

The window is handed to the engine as a soak that covered it (samples, restart snapshots at its
start and end, the latest memory.stat walk at both ends), so the rules, thresholds, waivers and the
one verdict function are exactly those of ``imagelint soak``; nothing here decides pass or fail.
"""

from __future__ import annotations

from imagelint.facts.cgroups import CgroupLayout, ProbeResult, Sample
from imagelint.facts.soak import SoakFacts, SoakResult
from imagelint.facts.systemd.show import RestartSnapshot
from imagelint.report.model import Outcome
from imagelint.rulepacks import Scope
from imagelint.session import PreparedRun, evaluate
from imagelint.targets import HostTarget
from imagelint.watch.state import RuleOutcome


def judge_window(
    run: PreparedRun,
    samples: list[Sample],
    layout: CgroupLayout,
    restarts: tuple[RestartSnapshot | None, RestartSnapshot | None],
    walk: ProbeResult | None,
    interval: float,
) -> tuple[RuleOutcome, ...]:
    """Each soak rule's outcome over the window (skipped rules left out)."""
    span = samples[-1].monotonic - samples[0].monotonic if len(samples) > 1 else 0.0
    result = SoakResult(
        span, interval, samples, False, samples[0].wall, samples[-1].wall, restarts[0], restarts[1]
    )
    facts = SoakFacts(result, layout, walk, walk, None, "not read by imagelint watch")
    report = evaluate(run, HostTarget(), scopes=(Scope.SOAK,), sources=(facts,))
    return tuple(
        RuleOutcome(r.rule_id, r.name, r.outcome.value)
        for r in report.rules
        if r.outcome is not Outcome.SKIPPED
    )
