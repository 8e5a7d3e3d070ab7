"""The live /proc/stat reader and the background sampler: this kernel's file, re-reads, caps, masking."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from imagelint.facts.cpustat import ProcStatError, parse_proc_stat
from imagelint.probes.cpu import CpuSampler, ProcStatReader
from tests.facts.cpustat_text import counters, proc_stat
from tests.support import wait_for


def _online() -> set[int]:
    cpus: set[int] = set()
    for part in Path("/sys/devices/system/cpu/online").read_text().strip().split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def test_this_kernels_file_lists_every_online_cpu_with_ten_columns() -> None:
    with ProcStatReader() as reader:
        first, second = reader.read(), reader.read()
    assert set(first.cpus) == _online()
    assert first.columns == 10 and first.note() is None
    assert all(b >= a for cpu in first.cpus for a, b in zip(first.cpus[cpu], second.cpus[cpu], strict=True))


def test_reader_rereads_from_the_start_and_caps_the_size(tmp_path: Path) -> None:
    path = tmp_path / "stat"
    path.write_text(proc_stat({c: counters(idle=c) for c in range(64)}, intr_irqs=2000))
    with ProcStatReader(str(path)) as reader:
        assert len(reader.read().cpus) == 64 and len(reader.read().cpus) == 64
    with (
        pytest.raises(ProcStatError, match="larger than 1000 bytes"),
        ProcStatReader(str(path), max_bytes=1000) as r,
    ):
        r.read()
    with pytest.raises(ProcStatError, match="cannot open"):
        ProcStatReader(str(tmp_path / "absent"))
    if os.path.exists("/proc/self/stat"):
        with pytest.raises(ProcStatError, match="no cpuN lines"), ProcStatReader("/proc/self/stat") as r:
            r.read()


def test_reads_this_kernel_in_the_background_and_masks_on_request() -> None:
    sampler = CpuSampler(period=0.02).start()
    try:
        assert wait_for(lambda: sampler.record.reads >= 4, 20, every=0.01)
        with sampler.masked():
            seen = sampler.record.reads
            assert wait_for(
                lambda: sampler.record.reads >= seen + 2, 20, every=0.01
            )  # the sampler thread got there
        assert wait_for(
            lambda: sampler.record.reads >= seen + 5, 20, every=0.01
        )  # the sampler thread got there
    finally:
        record = sampler.stop()
    assert record.error is None and record.online == sorted(
        parse_proc_stat(Path("/proc/stat").read_text()).cpus
    )
    assert record.masked >= 2 and any(record.masks)
    assert record.kept >= len(record.online) * 3
    assert record.cpu_seconds > 0
    assert any("imagelint's own memory.stat walk" in n for n in record.notes())
    record.tracker()  # replays without error, gaps bridged
    assert record.to_dict()["cpu_ms_per_read"] is not None


def test_a_long_soak_widens_the_period_to_fit_the_memory_cap() -> None:
    cpus = len(parse_proc_stat(Path("/proc/stat").read_text()).cpus)
    sampler = CpuSampler(period=0.1, duration=3600, max_cpu_intervals=1000)
    try:
        assert sampler.record.period == pytest.approx(3600 * cpus / 1000)
    finally:
        sampler.stop()


def test_a_read_that_fails_mid_soak_stops_the_reads_and_is_kept_as_an_error(tmp_path: Path) -> None:
    path = tmp_path / "stat"
    path.write_text(proc_stat({0: counters(idle=1)}))
    sampler = CpuSampler(period=0.02, path=str(path)).start()
    try:
        assert wait_for(lambda: sampler.record.reads >= 2, 20, every=0.01)
        with open(path, "w") as f:  # the same file (the reader keeps it open), now without cpu lines
            f.write("intr 0\n")
            f.flush()
            os.fsync(f.fileno())
        assert wait_for(
            lambda: sampler.record.error is not None, 20, every=0.01
        )  # the sampler thread got there
    finally:
        record = sampler.stop()
    assert record.error == f"{path}: no cpuN lines"
    assert "per-CPU reads stopped" in record.notes()[-1]


def test_a_live_tracker_is_fed_as_reads_come_and_keep_off_holds_no_reads() -> None:
    from imagelint.facts.hotcore import EpisodeTracker, HotCoreParams

    tracker = EpisodeTracker(HotCoreParams(window_seconds=0.1))
    sampler = CpuSampler(period=0.02, tracker=tracker, keep=False).start()
    try:
        assert wait_for(lambda: sampler.record.reads >= 6, 20, every=0.01)
        with sampler.lock:
            fed = tracker.fed
    finally:
        record = sampler.stop()
    assert fed >= 4 and tracker.fed == record.reads - 1  # every read after the first, as it came
    assert not record.ends and not record.spans and record.truncated_at is None
    assert not any("memory cap" in n for n in record.notes())
