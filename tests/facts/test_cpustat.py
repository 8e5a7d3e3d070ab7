"""/proc/stat per-CPU lines parsed: older formats, hotplug, counters going backwards."""

from __future__ import annotations

import pytest

from imagelint.facts.cpustat import ProcStatError, diff, parse_proc_stat
from tests.facts.cpustat_text import counters, proc_stat


def test_kernel_share_is_system_irq_softirq_and_guest_is_not_counted_twice() -> None:
    # user 100 of which guest 40: the total is 100 user + 20 system + 5 irq + 5 softirq + 70 idle = 200
    before = parse_proc_stat(proc_stat({0: [0] * 10}))
    after = parse_proc_stat(proc_stat({0: [100, 0, 20, 70, 0, 5, 5, 0, 40, 0]}))
    delta = diff(before, after).deltas[0]
    assert (delta.kernel, delta.busy, delta.total) == (30, 130, 200)
    assert delta.kernel_share == pytest.approx(0.15) and delta.busy_share == pytest.approx(0.65)


@pytest.mark.parametrize(
    ("columns", "missing"),
    [(4, "iowait, irq, softirq, steal"), (7, "steal, guest, guest_nice"), (9, "guest_nice")],
)
def test_older_kernels_fewer_columns_are_zero_and_said(columns: int, missing: str) -> None:
    before = parse_proc_stat(proc_stat({0: [0] * columns, 1: [0] * columns}))
    after = parse_proc_stat(
        proc_stat({0: [10, 0, 80, 10, 0, 0, 0, 0, 0][:columns], 1: [0, 0, 0, 100, 0, 0, 0, 0, 0][:columns]})
    )
    assert after.columns == columns
    note = after.note()
    assert note is not None and f"{columns} of 10" in note and missing in note
    interval = diff(before, after)
    assert interval.deltas[0].kernel_share == pytest.approx(0.8)
    assert interval.deltas[1].busy == 0


def test_more_columns_than_known_are_ignored_and_said() -> None:
    stat = parse_proc_stat(proc_stat({0: [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 99]}))
    assert stat.cpus[0] == (1, 2, 3, 4, 5, 6, 7, 8, 0, 0)
    assert "more than 10" in (stat.note() or "")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("cpu  1 2 3\ncpu0 1 2 3\n", "cpu0 has 3 columns, at least 4 needed"),
        ("cpu0 1 2 x 4\n", "not a number"),
        ("cpu0 1 2 -3 4\n", "negative"),
        ("cpuX 1 2 3 4\n", "not a cpuN line"),
        ("cpu0 1 2 3 4\ncpu0 1 2 3 4\n", "appears twice"),
        ("intr 1 2 3\nctxt 5\n", "no cpuN lines"),
    ],
)
def test_malformed_files_are_one_clear_error(text: str, error: str) -> None:
    with pytest.raises(ProcStatError, match=error) as caught:
        parse_proc_stat(text)
    assert str(caught.value).startswith("/proc/stat: ")
    assert caught.value.exit_code == 3


def test_hotplug_a_cpu_that_appears_or_disappears_has_no_interval_and_is_listed() -> None:
    two = parse_proc_stat(proc_stat({0: counters(idle=100), 1: counters(idle=100)}))
    three = parse_proc_stat(proc_stat({0: counters(idle=200), 1: counters(idle=200), 2: counters(idle=5)}))
    up = diff(two, three)
    assert up.appeared == [2] and sorted(up.deltas) == [0, 1]
    one = parse_proc_stat(proc_stat({0: counters(idle=300), 2: counters(idle=105)}))
    down = diff(three, one)
    assert down.disappeared == [1] and sorted(down.deltas) == [0, 2] and down.deltas[2].total == 100


def test_counters_going_backwards_drop_that_cpus_interval_iowait_is_clamped() -> None:
    before = parse_proc_stat(
        proc_stat({0: [10, 0, 4_294_967_290, 50, 9, 0, 0, 0, 0, 0], 1: [10, 0, 10, 50, 9, 0, 0, 0, 0, 0]})
    )
    # cpu0's system counter wrapped (32-bit) and cpu1's iowait went back by 2 (proc(5) documents this)
    after = parse_proc_stat(
        proc_stat({0: [20, 0, 5, 60, 9, 0, 0, 0, 0, 0], 1: [20, 0, 20, 60, 7, 0, 0, 0, 0, 0]})
    )
    interval = diff(before, after)
    assert interval.backwards == [(0, "system")] and 0 not in interval.deltas
    assert interval.iowait_clamped == [1] and interval.deltas[1].total == 30
    # the next interval starts from the new values
    later = parse_proc_stat(
        proc_stat({0: [20, 0, 15, 60, 9, 0, 0, 0, 0, 0], 1: [20, 0, 20, 70, 7, 0, 0, 0, 0, 0]})
    )
    assert diff(after, later).deltas[0].kernel_share == 1.0


def test_an_interval_without_ticks_is_not_judged() -> None:
    same = parse_proc_stat(proc_stat({0: counters(idle=5)}))
    interval = diff(same, same)
    assert interval.idle_cpus == [0] and not interval.deltas
