"""The memory.stat walk timed at every Nth soak sample, and the per-CPU line of the soak's notes."""

from __future__ import annotations

import time

from imagelint.facts.cgroups import CgroupLayout, ProbeResult, Sample
from imagelint.facts.cpurecord import CpuRecord
from imagelint.facts.cpustat import parse_proc_stat
from imagelint.facts.soak import SoakFacts
from imagelint.soak.runner import run_soak
from tests.facts.cpustat_text import counters, proc_stat

LAYOUT = CgroupLayout("v1", "v1", None, None)


class Counting:
    def __init__(self) -> None:
        self.calls = 0

    def sample(self) -> Sample:
        self.calls += 1
        return Sample(time.monotonic(), time.time(), LAYOUT, 10, self.calls, "num_cgroups")


def _probe(seconds: float) -> ProbeResult:
    return ProbeResult("v1", 10, seconds, seconds, 100, 0)


def test_the_walk_is_timed_after_every_nth_sample_but_not_the_first() -> None:
    calls: list[int] = []
    sampler = Counting()

    def probe() -> ProbeResult:
        calls.append(sampler.calls)
        return _probe(0.001 * len(calls))

    result = run_soak(sampler, duration=0.5, interval=0.05, restarts=None, probe=probe, probe_every=3)
    indexes = list(range(3, len(result.samples), 3))  # 3, 6, 9 when no slot was skipped
    assert len(indexes) >= 1 and calls == [i + 1 for i in indexes]
    assert [t for t, _ in result.walks] == [
        result.samples[i].monotonic - result.samples[0].monotonic for i in indexes
    ]
    facts = SoakFacts(result, LAYOUT, _probe(0.0005), _probe(0.0045))
    series = facts.walks
    timed = [0.0005, *(0.001 * k for k in range(1, len(indexes) + 1)), 0.0045]
    assert [p.seconds for _, p in series.points] == timed
    assert series.trend_text() == (
        f"memory.stat walk 0.5 ms → 4.5 ms over {len(timed)} timing(s) (slowest 4.5 ms, 10 → 10 cgroups)"
    )
    assert facts.to_dict()["memory_stat_walk"]["series"]["seconds"] == [round(t, 6) for t in timed]


def test_the_notes_say_what_the_per_cpu_reads_saw_and_tolerated() -> None:
    result = run_soak(Counting(), duration=0.0, interval=1.0, restarts=None)
    none = SoakFacts(result, LAYOUT, cpu_note="/proc/stat: cannot open: No such file or directory")
    assert none.summary_lines()[-1] == (
        "soak: per-CPU time not read (/proc/stat: cannot open: No such file or directory)"
    )
    record = CpuRecord(0.1, 0.0, reads=51, cpu_seconds=0.0051)
    values = {0: counters(), 1: counters()}
    prev = parse_proc_stat(proc_stat(values))
    for i in range(50):
        values = {0: counters(system=10 * (i + 1)), 1: counters(idle=10 * (i + 1))}
        cur = parse_proc_stat(proc_stat(values) if i != 30 else proc_stat({0: values[0]}))
        record.add(prev, cur, 0.1 * i, 0.1 * (i + 1))
        prev = cur
    line = SoakFacts(result, LAYOUT, cpu=record).summary_lines()[-1]
    assert line.startswith("soak: per-CPU /proc/stat read 51 times every 0.1 s (0.10 ms CPU per read)")
    assert "longest run at ≥ 90% kernel time: 5.0 s on cpu0" in line
    assert "CPUs went online 1 and offline 1 time(s)" in line
    data = SoakFacts(result, LAYOUT, cpu=record).to_dict()["cpu"]
    assert data["hot_core"]["cpus"] == [0] and data["counts"] == {"disappeared": 1, "appeared": 1}
