"""What one soak sample costs on a host with many memory cgroups, against what kubelet's walk costs.

Creates (as root, on the cgroup v1 memory hierarchy) 5,000 live memory cgroups and 20,000 dying
ones (mkdir, a helper process moves itself in and dirties one page of page cache, moves out,
rmdir: one helper process does all 20,000), then measures:

1. CPU time (user + system, this thread) of one ``CgroupSampler.sample()``; goal <= 20 ms;
2. the same as a ratio of one read of every live cgroup's ``memory.stat`` (the symptom probe,
   what kubelet and cAdvisor do); goal <= 0.1;
3. the average CPU of a soak at a 5 s interval, measured over ``--soak-seconds`` (60 by default)
   and extrapolated to a 10-minute soak, which has the same per-sample cost and sample rate;
   goal < 1 % of one core.

Everything is removed afterwards, in ``finally``: the helper, the live directories, the page cache
(file deleted, sync, drop caches) that pins the dying ones, and the parent cgroups.

    sudo .venv/bin/python benchmarks/soak_sample_cost.py [--live 5000] [--dying 20000] [--soak-seconds 60]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from imagelint.probes.cgroups import CgroupSampler, probe_memory_stat
from imagelint.soak.runner import run_soak

V1_MEMORY = Path("/sys/fs/cgroup/memory")

# One process makes every dying cgroup: it writes "0" (itself) into the new cgroup's cgroup.procs,
# dirties one new page of a shared file (page cache charged to that cgroup), moves back, rmdirs.
HELPER = r"""
import os, sys
root, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
home = os.path.join(root, "cgroup.procs")
fd = os.open(data, os.O_WRONLY | os.O_CREAT, 0o600)
page = b"x" * 4096
for i in range(n):
    cg = os.path.join(root, "dying", "d%d" % i)
    os.mkdir(cg)
    with open(os.path.join(cg, "cgroup.procs"), "w") as f:
        f.write("0")
    os.pwrite(fd, page, i * 4096)
    with open(home, "w") as f:
        f.write("0")
    os.rmdir(cg)
os.close(fd)
"""


def thread_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_THREAD)
    return r.ru_utime + r.ru_stime


def process_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def memory_num_cgroups() -> int:
    for line in Path("/proc/cgroups").read_text().splitlines():
        p = line.split()
        if p and p[0] == "memory":
            return int(p[2])
    raise RuntimeError("no memory row in /proc/cgroups")


def drop_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--live", type=int, default=5000)
    ap.add_argument("--dying", type=int, default=20000)
    ap.add_argument("--soak-seconds", type=float, default=60.0)
    ap.add_argument("--interval", type=float, default=5.0)
    ap.add_argument("--repeats", type=int, default=15, help="samples and probes to take for the medians")
    args = ap.parse_args()
    if os.geteuid() != 0 or not (V1_MEMORY / "memory.usage_in_bytes").exists():
        print("needs root and a cgroup v1 memory hierarchy at /sys/fs/cgroup/memory", file=sys.stderr)
        return 2

    root = V1_MEMORY / f"imagelint-bench-{os.getpid()}"
    scratch = Path(tempfile.mkdtemp(prefix="imagelint-bench-", dir="/var/tmp"))
    live_dirs: list[Path] = []
    helper: subprocess.Popen[bytes] | None = None
    baseline = memory_num_cgroups()
    try:
        root.mkdir()
        (root / "dying").mkdir()
        # live: 50 "slices" of 100 "units" each, like a host's service tree
        t = time.monotonic()
        per_slice = 100
        for i in range(args.live):
            if i % per_slice == 0:
                s = root / "live" / f"slice-{i // per_slice}"
                s.mkdir(parents=True)
                live_dirs.append(s)
            d = s / f"unit-{i}"
            d.mkdir()
            live_dirs.append(d)
        print(f"made {len(live_dirs)} live memory cgroups in {time.monotonic() - t:.1f} s")
        t = time.monotonic()
        helper = subprocess.Popen(
            [sys.executable, "-c", HELPER, str(root), str(scratch / "pages"), str(args.dying)]
        )
        if helper.wait() != 0:
            raise RuntimeError(f"the helper failed with {helper.returncode}")
        print(f"made {args.dying} dying memory cgroups in {time.monotonic() - t:.1f} s")

        sampler = CgroupSampler()
        s = sampler.sample()
        print(
            f"sample: layout={s.layout.kind} memory={s.layout.memory} live={s.live} dying={s.dying} "
            f"(/proc/cgroups {s.num_cgroups}, before the benchmark {baseline})"
        )
        if s.live < args.live or s.dying < args.dying * 0.95:
            print("!! the cgroups were not all made or are not all dying: figures below are not valid")

        # CPU accounting here is tick-based (4 ms steps): time blocks of calls and divide
        c, w = thread_cpu(), time.perf_counter()
        for _ in range(args.repeats):
            sampler.sample()
        cpu = (thread_cpu() - c) / args.repeats
        sample_wall = (time.perf_counter() - w) / args.repeats
        n_probes = max(3, args.repeats // 3)
        probes = [probe_memory_stat(sampler.layout) for _ in range(n_probes)]
        probe_cpu = sum(p.cpu_seconds for p in probes) / n_probes
        probe_wall = sum(p.seconds for p in probes) / n_probes
        print()
        print(
            f"one sample, CPU:          mean {cpu * 1e3:7.2f} ms over {args.repeats} samples "
            f"(wall {sample_wall * 1e3:.2f} ms)   goal <= 20 ms: {'met' if cpu <= 0.020 else 'MISSED'}"
        )
        print(
            f"memory.stat walk, CPU:    mean {probe_cpu * 1e3:7.2f} ms  over {probes[0].cgroups} cgroups "
            f"(wall {probe_wall * 1e3:.2f} ms, {probes[0].bytes_read:,} bytes; n={len(probes)})"
        )
        ratio = cpu / probe_cpu if probe_cpu > 0 else float("inf")
        print(f"ratio sample / walk:      {ratio:7.4f}   goal <= 0.1: {'met' if ratio <= 0.1 else 'MISSED'}")

        if args.soak_seconds > 0:
            c, w = process_cpu(), time.monotonic()
            result = run_soak(sampler, duration=args.soak_seconds, interval=args.interval, restarts=None)
            used, wall = process_cpu() - c, time.monotonic() - w
            share = used / wall
            print(
                f"soak {args.soak_seconds:g} s at {args.interval:g} s: {len(result.samples)} samples, "
                f"process CPU {used * 1e3:.1f} ms over {wall:.1f} s = {share * 100:.3f} % of one core "
                f"(sampler alone {result.sampler_cpu_seconds * 1e3:.1f} ms)"
            )
            per_sample = used / len(result.samples)
            ten_min = per_sample * (600 / args.interval + 1) / 600
            print(
                f"extrapolated to a 10-minute soak at {args.interval:g} s (same cost per sample, "
                f"{600 / args.interval + 1:.0f} samples): {ten_min * 100:.3f} % of one core   "
                f"goal < 1 %: {'met' if ten_min < 0.01 else 'MISSED'}"
            )
        return 0
    finally:
        if helper is not None and helper.poll() is None:
            helper.kill()
            helper.wait()
        for d in reversed(live_dirs):
            with contextlib.suppress(OSError):
                d.rmdir()
        shutil.rmtree(scratch, ignore_errors=True)
        drop_caches()
        for d in (root / "live", root / "dying", root):
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
        deadline = time.monotonic() + 60
        while memory_num_cgroups() > baseline + 20 and time.monotonic() < deadline:
            time.sleep(0.5)
        left = [p.name for p in V1_MEMORY.iterdir() if p.name.startswith("imagelint-bench-")]
        print(
            f"cleanup: /proc/cgroups memory {memory_num_cgroups()} (before: {baseline}); "
            f"directories left: {left or 'none'}; scratch left: {scratch.exists()}"
        )


if __name__ == "__main__":
    sys.exit(main())
