"""cpu.hot_core through the engine on synthetic soak facts: IL407 alone, IL408 with memcg evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagelint.config import Config
from imagelint.engine import RunSettings, audit
from imagelint.facts.cgroups import CgroupLayout, ProbeResult, Sample
from imagelint.facts.cpurecord import CpuRecord
from imagelint.facts.cpustat import parse_proc_stat
from imagelint.facts.soak import SoakFacts, SoakResult
from imagelint.report import Verdict
from imagelint.rulepacks import Scope
from imagelint.rulepacks.loader import builtin_pack_paths, load_packs
from imagelint.targets import RootfsTarget
from tests.facts.cpustat_text import proc_stat

LAYOUT = CgroupLayout("v1", "v1", None, None)
SOAK_PACK = [p for p in builtin_pack_paths() if p.name == "soak.yaml"]


def _record(
    hot_seconds: float, *, kind: str = "kernel", cpu: int = 1, seconds: float = 20.0, other: str = "idle"
) -> CpuRecord:
    """Two CPUs read every 100 ms; ``cpu`` busy (in the kernel, or in user time) from 5 s on; the
    other CPU idle, busy in user time or busy in the kernel meanwhile (``other``)."""
    columns = {"kernel": 2, "user": 0, "idle": 3}  # system, user, idle
    record = CpuRecord(0.1, 0.0, online=[0, 1])
    values = {0: [0] * 10, 1: [0] * 10}
    prev = parse_proc_stat(proc_stat(values))
    for i in range(round(seconds / 0.1)):
        hot = 50 <= i < 50 + round(hot_seconds / 0.1)
        for c in (0, 1):
            column = 3 if not hot else columns[kind] if c == cpu else columns[other]
            values[c][column] += 10
        cur = parse_proc_stat(proc_stat(values))
        record.add(prev, cur, 0.1 * i, 0.1 * (i + 1))
        prev = cur
    return record


def _facts(record: CpuRecord | None, *, dying_per_sample: int = 0, walk_s: float = 0.001) -> SoakFacts:
    samples = [
        Sample(2.0 * i, 2.0 * i, LAYOUT, 10, 5 + dying_per_sample * i, "num_cgroups") for i in range(11)
    ]
    result = SoakResult(20.0, 2.0, samples, False, 0.0, 20.0)
    result.walks = [(10.0, ProbeResult("v1", 10, walk_s, walk_s, 1000, 0))]
    quick = ProbeResult("v1", 10, 0.001, 0.001, 1000, 0)
    return SoakFacts(result, LAYOUT, quick, quick, cpu=record, cpu_note="no /proc/stat here")


def _run(
    facts: SoakFacts, warnings: list[str] | None = None, **config: object
) -> dict[str, tuple[str, list[str], str]]:
    packs = load_packs([], builtin=SOAK_PACK)
    cfg = Config(select=["IL407", "IL408"], **config)  # type: ignore[arg-type]
    cfg.apply_parameters(packs)
    report = audit(RootfsTarget(Path("/")), packs, cfg, RunSettings(scopes=(Scope.SOAK,), sources=(facts,)))
    out = {}
    for r in report.rules:
        if r.rule_id in ("IL407", "IL408"):
            messages = [f.message for f in report.findings if f.rule_id == r.rule_id]
            severities = [f.severity for f in report.findings if f.rule_id == r.rule_id]
            out[r.rule_id] = (r.outcome, messages, severities[0] if severities else "")
    out["verdict"] = (report.verdict, [], "")
    if warnings is not None:
        warnings += [w.message for w in report.warnings]
    return out


def test_a_kernel_hot_core_alone_is_il407_medium_naming_the_cpu() -> None:
    out = _run(_facts(_record(6.0)))
    outcome, (message,), severity = out["IL407"]
    assert outcome == "fail" and severity == "medium"
    assert message.startswith(
        "cpu1 saturated in the kernel (100% kernel time for 6.0 s on cpu1; 1 episode(s) of ≥ 3 s"
    )
    assert "other CPUs' kernel share stayed ≤ 0% (they were ≤ 0% busy" in message
    assert "memory.stat walk" in message
    assert out["IL408"][0] == "pass"
    assert out["verdict"][0] == Verdict.FAIL


def test_with_dying_memcgs_growing_it_is_il408_high_and_il407_stays_quiet() -> None:
    out = _run(_facts(_record(6.0), dying_per_sample=3))  # +3 every 2 s: 5,400 an hour
    outcome, (message,), severity = out["IL408"]
    assert outcome == "fail" and severity == "high"
    assert "with dying memory cgroups grow by" in message and "cpu1" in message
    assert out["IL407"][0] == "pass"


def test_with_a_slow_walk_during_the_soak_it_is_il408() -> None:
    out = _run(_facts(_record(6.0), walk_s=1.5))
    assert out["IL408"][0] == "fail" and "a memory.stat walk of 10 cgroups took 1.50 s" in out["IL408"][1][0]
    assert out["IL407"][0] == "pass"


@pytest.mark.parametrize(("hot", "kind"), [(6.0, "user"), (2.0, "kernel"), (0.0, "kernel")])
def test_user_time_or_a_short_burst_stays_quiet(hot: float, kind: str) -> None:
    out = _run(_facts(_record(hot, kind=kind), dying_per_sample=3))
    assert out["IL407"][0] == out["IL408"][0] == "pass"


def test_a_hot_core_beside_a_core_busy_in_user_time_is_named() -> None:
    """Issue 49: the incident's GPU nodes had their other cores busy in user time."""
    out = _run(_facts(_record(6.0, other="user")))
    outcome, (message,), _ = out["IL407"]
    assert outcome == "fail" and "6.0 s on cpu1" in message
    assert "other CPUs' kernel share stayed ≤ 0% (they were ≤ 100% busy" in message


def test_kernel_time_on_every_core_is_not_a_hot_core() -> None:
    assert _run(_facts(_record(6.0, other="kernel")))["IL407"][0] == "pass"


def test_the_deprecated_max_others_busy_still_validates_is_read_and_warns() -> None:
    """Users' packs written for the old parameter keep working: it stands for the new one."""
    warnings: list[str] = []
    out = _run(_facts(_record(6.0, other="kernel")), warnings, parameters={"IL407": {"max_others_busy": 1.0}})
    assert out["IL407"][0] == "fail"
    assert any("max_others_busy is deprecated" in w for w in warnings), warnings
    newer: list[str] = []
    out = _run(
        _facts(_record(6.0, other="kernel")), newer, parameters={"IL407": {"max_others_kernel_share": 1.0}}
    )
    assert out["IL407"][0] == "fail" and not any("deprecated" in w for w in newer)


def test_thresholds_are_parameters() -> None:
    out = _run(_facts(_record(2.0)), parameters={"IL407": {"min_seconds": 1.5}})
    assert out["IL407"][0] == "fail" and "2.0 s on cpu1" in out["IL407"][1][0]


def test_per_cpu_reads_not_taken_or_failed_are_inconclusive() -> None:
    """Every Linux host has /proc/stat: a soak without its reads cannot pass (issue 40)."""
    out = _run(_facts(None))
    assert out["IL407"][0] == out["IL408"][0] == "error" and out["verdict"][0] == Verdict.INCONCLUSIVE
    broken = _record(6.0)
    broken.error = "/proc/stat: no cpuN lines"
    out = _run(_facts(broken))
    assert out["IL407"][0] == "error" and out["verdict"][0] == Verdict.INCONCLUSIVE


def test_reads_past_the_memory_cap_cannot_pass() -> None:
    record = _record(0.0)
    record.truncated_at = 12.0
    out = _run(_facts(record))
    assert out["IL407"][0] == "error" and out["verdict"][0] == Verdict.INCONCLUSIVE
