"""What the soak's per-CPU reads cost: CPU per /proc/stat read, on this host and on a synthetic 64-CPU file.

One read is what the sampler thread does ten times a second: read ``/proc/stat``, parse the cpuN
lines, diff against the previous read, keep the deltas (:meth:`CpuRecord.add`). Measured as CPU time
of this thread (``time.thread_time``: user + system, so the kernel's generation of /proc/stat counts)
over ``--reads`` reads, and printed:

1. per read on this host's ``/proc/stat``; goal < 1 ms (ratio against the goal);
2. per read on a synthetic 64-CPU ``/proc/stat`` (a regular file with 64 cpuN lines and an ``intr``
   line of 1,024 counters, as a large host has): the parsing side of a big host. The kernel's own
   cost of generating /proc/stat on a real 64-CPU host cannot be measured here;
3. per soak sample at the default 5 s interval (50 reads), and as a share of one core;
4. against one cgroup sample (``CgroupSampler.sample()``) measured in the same run;
5. the check's replay of the kept reads through the episode tracker, per read.

    .venv/bin/python benchmarks/cpustat_cost.py [--reads 1000]   (about 15 s)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from imagelint.facts.cpurecord import CpuRecord
from imagelint.probes.cgroups import CgroupSampler
from imagelint.probes.cpu import ProcStatReader

GOAL_MS = 1.0
READS_PER_SECOND = 10
SOAK_INTERVAL_S = 5.0


def synthetic_proc_stat(cpus: int, irqs: int, tick: int) -> str:
    """A /proc/stat in the kernel's layout; counters move with ``tick`` so that deltas are non-zero."""
    lines = [f"cpu  {tick * cpus} 0 {tick * cpus} {tick * cpus * 8} 0 0 0 0 0 0"]
    lines += [f"cpu{c} {tick + c} 0 {tick * 2} {tick * 7 + c} 5 1 {tick // 3} 0 0 0" for c in range(cpus)]
    lines.append("intr " + " ".join(str(tick * 3 + i) for i in range(irqs + 1)))
    lines += [
        f"ctxt {tick * 99}",
        "btime 1700000000",
        f"processes {tick}",
        "procs_running 2",
        "procs_blocked 0",
    ]
    lines.append("softirq " + " ".join(str(tick + i) for i in range(11)))
    return "\n".join(lines) + "\n"


def per_read_ms(path: str, reads: int, rewrite: list[str] | None = None) -> tuple[float, CpuRecord]:
    """CPU ms per read+parse+diff+keep; with ``rewrite``, the file cycles through those contents,
    without it 10 ms pass between reads (so that the kernel's counters move, as at 10 reads/s)."""
    record = CpuRecord(0.1, 0.0)
    with ProcStatReader(path) as reader:
        prev = reader.read()
        cpu = 0.0
        for i in range(reads):
            if rewrite is not None:  # not timed: stands in for the kernel updating its counters
                Path(path).write_text(rewrite[i % len(rewrite)])
            else:
                time.sleep(0.01)
            c0 = time.thread_time()
            cur = reader.read()
            record.add(prev, cur, 0.1 * i, 0.1 * (i + 1))
            cpu += time.thread_time() - c0
            prev = cur
    return 1000 * cpu / reads, record


def replay_ms(record: CpuRecord) -> float:
    c0 = time.thread_time()
    record.tracker()
    return 1000 * (time.thread_time() - c0) / max(1, len(record.ends))


def cgroup_sample_ms(n: int = 20) -> float:
    sampler = CgroupSampler()
    sampler.sample()
    c0 = time.thread_time()
    for _ in range(n):
        sampler.sample()
    return 1000 * (time.thread_time() - c0) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=1000)
    args = parser.parse_args()

    host_ms, host_record = per_read_ms("/proc/stat", args.reads)
    with ProcStatReader() as reader:
        cpus = len(reader.read().cpus)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "stat")
        contents = [synthetic_proc_stat(64, 1024, 1000 + 10 * k) for k in range(50)]
        Path(path).write_text(contents[0])
        big_ms, big_record = per_read_ms(path, args.reads, rewrite=contents[1:])
    cgroup_ms = cgroup_sample_ms()
    per_soak_sample = host_ms * READS_PER_SECOND * SOAK_INTERVAL_S

    print(f"per-CPU reads, {args.reads} reads each, CPU time of this thread (user + system)")
    print(
        f"  this host ({cpus} CPUs):     {host_ms:.4f} ms per read   ratio to the {GOAL_MS:g} ms goal: "
        f"{host_ms / GOAL_MS:.3f}"
    )
    print(
        f"  synthetic 64 CPUs:         {big_ms:.4f} ms per read   ratio to the {GOAL_MS:g} ms goal: "
        f"{big_ms / GOAL_MS:.3f}   ({big_ms / host_ms:.1f}x this host)"
    )
    print(
        f"  one cgroup sample:         {cgroup_ms:.4f} ms           per-CPU read / cgroup sample: "
        f"{host_ms / cgroup_ms:.3f}"
    )
    print(
        f"  per soak sample at {SOAK_INTERVAL_S:g} s ({READS_PER_SECOND * SOAK_INTERVAL_S:.0f} reads): "
        f"{per_soak_sample:.3f} ms = {per_soak_sample / cgroup_ms:.2f}x one cgroup sample; "
        f"{host_ms * READS_PER_SECOND / 10:.4f}% of one core (64 CPUs: {big_ms * READS_PER_SECOND / 10:.4f}%)"
    )
    print(
        f"  check-time replay:         {replay_ms(host_record):.4f} ms per read ({cpus} CPUs), "
        f"{replay_ms(big_record):.4f} ms per read (64 CPUs)"
    )


if __name__ == "__main__":
    main()
