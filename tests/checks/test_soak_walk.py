"""The memory.stat walk a soak times at its end is a source IL406 needs: not timed, the rule is an
error and the soak inconclusive, never a pass (issue 40). The facts are a soak's measurements as data,
judged through :func:`imagelint.session.judge_soak` as a real soak's are."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from imagelint.facts.cgroups import CgroupLayout, ProbeResult, Sample
from imagelint.facts.soak import SoakFacts, SoakResult
from imagelint.facts.systemd.show import RestartSnapshot, parse_systemctl_show
from imagelint.report import Outcome, Verdict
from imagelint.session import RunOptions, judge_soak, prepare
from imagelint.targets.rootfs import RootfsTarget

LAYOUT = CgroupLayout("v1", "v1", None, None)
SHOW = "Id=a.service\nNRestarts=1\nActiveState=active\nSubState=running\n"
WALK = ProbeResult("v1", 10, 0.01, 0.01, 1000, 0)


def _facts() -> SoakFacts:
    """Three quiet samples, both counters read, both walks timed: a soak that passes."""
    samples = [Sample(float(t), 1e9 + t, LAYOUT, 10, 5, "proc_cgroups_minus_dirs") for t in range(3)]
    start = RestartSnapshot(1e9, True, None, parse_systemctl_show(SHOW))
    result = SoakResult(2.0, 1.0, samples, False, 1e9, 1e9 + 2, start, replace(start, wall=1e9 + 2))
    return SoakFacts(result, LAYOUT, WALK, WALK)


def _judge(tmp_path: Path, facts: SoakFacts) -> tuple[Verdict, Outcome]:
    run = prepare(RunOptions(select=["IL406"], outputs=[]))
    report = judge_soak(run, RootfsTarget(tmp_path), facts)
    (result,) = [r for r in report.rules if r.rule_id == "IL406"]
    return report.verdict, result.outcome


def test_a_timed_walk_passes_and_a_walk_not_timed_is_inconclusive(tmp_path: Path) -> None:
    assert _judge(tmp_path, _facts()) == (Verdict.PASS, Outcome.PASS)
    facts = _facts()
    facts.walk_end = None
    assert _judge(tmp_path, facts) == (Verdict.INCONCLUSIVE, Outcome.ERROR)
