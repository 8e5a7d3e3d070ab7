"""Per-CPU saturation in the watch (the /proc/stat sampler of issue 18), on this kernel: a pinned load in
kernel time is counted on its CPU and is the longest episode; the same load in user time is not.

As in tests/soak/test_hot_core.py, the load runs pinned under SCHED_FIFO so the neighbours cannot
take its CPU, and only what a shared machine cannot give is loosened (the other CPUs' idleness, a
margin below the ~95 % the load gets)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from imagelint.facts.hotcore import HotCoreParams
from imagelint.watch import metrics
from imagelint.watch.cpu import CpuUnavailable, CpuWatch
from imagelint.watch.state import WatchState
from tests.soak.loads import KERNEL_LOAD, USER_LOAD, pinned, pinned_cpu, sampler_first, two_cpus

LOOSE = HotCoreParams(min_kernel_share=0.75, max_others_kernel_share=1.0)


def _watch_for(seconds: float, cpu_watch: CpuWatch, *, masked: bool = False) -> WatchState:
    deadline = time.monotonic() + seconds
    state = None
    while time.monotonic() < deadline:
        if masked:
            cpu_watch.mask()  # as after each of the watch's own memory.stat walks
        state = cpu_watch.poll(time.monotonic())
        time.sleep(0.5)
    return WatchState(0.0, cpu=state)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.serial
def test_a_pinned_kernel_load_is_counted_on_its_cpu() -> None:
    cpu = pinned_cpu()
    watch = CpuWatch(params=LOOSE)
    watch.poll(time.monotonic())
    with pinned(KERNEL_LOAD, cpu):
        state = _watch_for(8, watch)
    assert state.cpu is not None
    assert state.cpu.saturated_seconds.get(str(cpu), 0.0) >= 4, state.cpu
    assert state.cpu.longest_episode_cpu == str(cpu) and state.cpu.longest_episode_seconds >= 4
    text = metrics.exposition(metrics.registry(lambda: state, process=False)).decode()
    assert f'imagelint_cpu_saturated_seconds_total{{cpu="{cpu}"}}' in text
    assert "imagelint_cpu_saturation_longest_episode_seconds " in text


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.serial
def test_the_same_load_in_user_time_is_not_saturation() -> None:
    cpu = pinned_cpu()
    watch = CpuWatch(params=LOOSE)
    watch.poll(time.monotonic())
    with pinned(USER_LOAD, cpu):
        state = _watch_for(5, watch)
    assert state.cpu is not None and state.cpu.saturated_seconds.get(str(cpu), 0.0) == 0.0


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.serial
def test_masked_time_is_not_judged() -> None:
    cpu = pinned_cpu()
    watch = CpuWatch(params=LOOSE)
    watch.poll(time.monotonic())
    with pinned(KERNEL_LOAD, cpu):
        state = _watch_for(5, watch, masked=True)
    assert state.cpu is not None and state.cpu.saturated_seconds.get(str(cpu), 0.0) == 0.0


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.serial
def test_a_kernel_load_beside_a_core_busy_in_user_time_is_counted() -> None:
    """Issue 49: the watch judges the others' kernel share (default bound), not their user time."""
    user, kernel = two_cpus()
    watch = CpuWatch(params=HotCoreParams(min_kernel_share=0.75))
    with sampler_first(), pinned(USER_LOAD, user), pinned(KERNEL_LOAD, kernel):
        watch.poll(time.monotonic())
        state = _watch_for(6, watch)
    assert state.cpu is not None
    assert state.cpu.longest_episode_cpu == str(kernel) and state.cpu.longest_episode_seconds >= 3, state.cpu
    assert state.cpu.saturated_seconds.get(str(user), 0.0) == 0.0


def test_a_missing_proc_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(CpuUnavailable, match="cannot open"):
        CpuWatch(str(tmp_path)).poll(1.0)
