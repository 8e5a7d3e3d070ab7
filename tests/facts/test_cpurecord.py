"""The per-CPU record of the sampler: hotplug, counters backwards, older format, memory cap, series."""

from __future__ import annotations

import pytest

from imagelint.facts.cpurecord import CpuRecord
from imagelint.facts.cpustat import parse_proc_stat
from tests.facts.cpustat_text import counters, proc_stat


def _stat(cpus: dict[int, list[int]]):  # type: ignore[no-untyped-def]
    return parse_proc_stat(proc_stat(cpus))


def test_hotplug_backwards_and_iowait_are_counted_and_said() -> None:
    record = CpuRecord(0.1, 0.0, online=[0, 1])
    a = _stat({0: counters(idle=10), 1: counters(idle=10)})
    b = _stat({0: counters(idle=20), 1: counters(idle=20), 2: counters(idle=1)})  # cpu2 online
    c = _stat({0: counters(idle=30), 2: counters(idle=11)})  # cpu1 offline
    d = _stat({0: [0, 0, 0, 5, 0, 0, 0, 0, 0, 0], 2: [0, 0, 0, 21, 0, 0, 0, 0, 0, 0]})  # cpu0 idle back
    e = _stat({0: [0, 0, 0, 15, 0, 0, 0, 0, 0, 0], 2: [0, 0, 0, 31, 0, 0, 0, 0, 0, 0]})
    for i, (x, y) in enumerate([(a, b), (b, c), (c, d), (d, e)]):
        record.add(x, y, 0.1 * i, 0.1 * (i + 1))
    assert record.counts == {"appeared": 1, "disappeared": 1, "backwards": 1}
    assert record.events == [
        "0.1 s: cpu2 came online",
        "0.2 s: cpu1 went offline",
        "0.3 s: cpu0 idle went backwards",
    ]
    notes = " / ".join(record.notes())
    assert "online 1 and offline 1 time(s)" in notes and "went backwards 1 time(s)" in notes
    judged = [sorted(i.deltas) for _, _, i in record.intervals() if i is not None]
    assert judged == [[0, 1], [0, 2], [2], [0, 2]]


def test_older_format_is_said_once() -> None:
    old = parse_proc_stat(proc_stat({0: [1, 2, 3, 4, 5, 6, 7]}))
    record = CpuRecord(0.1, 0.0, columns_note=old.note())
    assert "7 of 10" in record.notes()[0]


def test_past_the_memory_cap_reads_stop_being_kept_and_it_is_said() -> None:
    record = CpuRecord(0.1, 0.0, max_cpu_intervals=4)
    stats = [_stat({0: counters(idle=10 * i), 1: counters(idle=10 * i)}) for i in range(1, 6)]
    for i in range(4):
        record.add(stats[i], stats[i + 1], 0.1 * i, 0.1 * (i + 1))
    assert record.kept == 4 and record.truncated_at == pytest.approx(0.2)
    assert any("memory cap" in n for n in record.notes())


def test_series_at_the_soak_interval() -> None:
    record = CpuRecord(0.1, 0.0)
    prev = _stat({0: counters(), 1: counters()})
    for i in range(40):  # 4 s: cpu0 in the kernel for the first 2 s, cpu1 idle
        hot = i < 20
        cur = _stat(
            {
                0: counters(
                    system=prev.cpus[0][2] + (10 if hot else 0), idle=prev.cpus[0][3] + (0 if hot else 10)
                ),
                1: counters(idle=prev.cpus[1][3] + 10),
            }
        )
        record.add(prev, cur, 0.1 * i, 0.1 * (i + 1))
        prev = cur
    series = record.series(2.0)
    assert series["times"] == [2.0, 4.0]
    assert series["kernel_share"] == {"cpu0": [1.0, 0.0], "cpu1": [0.0, 0.0]}
