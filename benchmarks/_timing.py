"""Shared timing helpers for the benchmark scripts: median wall (or CPU) time of a command over N runs."""

from __future__ import annotations

import resource
import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def median_wall(cmd: list[str], runs: int, *, ok_codes: tuple[int, ...] = (0,), cpu: bool = False) -> float:
    """Median seconds of ``cmd`` over ``runs`` runs after one warm-up (page cache, pyc files).

    ``cpu``: the child's CPU time (user + system) instead of wall time, which a machine busy with
    other work stretches far more than it does CPU time."""
    times = []
    for i in range(runs + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        elapsed = time.perf_counter() - started
        if cpu:
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            elapsed = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        if proc.returncode not in ok_codes:
            raise SystemExit(f"{cmd[0]} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
        if i:
            times.append(elapsed)
    return statistics.median(times)


def test_rootfs() -> Path:
    """The cached debootstrapped Debian image the tests use (built on first use; needs root)."""
    out = subprocess.run(
        ["bash", str(REPO / "scripts/build-test-rootfs.sh")], capture_output=True, text=True, check=True
    )
    return Path(out.stdout.strip().splitlines()[-1])


def report(name: str, ours: float, baseline_name: str, baseline: float, goal: float) -> None:
    ratio = ours / baseline
    verdict = "meets" if ratio <= goal else "MISSES"
    figures = f"{name}: {ours * 1000:.1f} ms; {baseline_name}: {baseline * 1000:.1f} ms"
    print(f"{figures}; ratio {ratio:.2f} ({verdict} goal ≤ {goal})")
