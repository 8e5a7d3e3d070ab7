"""Wall time of `imagelint audit` (all built-in packs) on the realistic cloud test image, against systemctl.

Baseline: ``systemctl --root=ROOT list-unit-files`` on the same image, in the same run. The two run
in pairs (systemctl, then the audit, then the next pair), and each pair gives one ratio, so a machine
busy with other work slows both sides of a ratio alike; the median of the ratios is the figure, with
its quartiles and the load average beside it. The image is the cloud flavour the tests build
(``scripts/build-test-rootfs.sh --flavour cloud``: 294 units, ~340 packages), or ``--root``. The
imagelint package that is timed is compiled to bytecode first, as ``speed.py`` does (under
``PYTHONDONTWRITEBYTECODE`` every run would otherwise compile the modules changed since the last
bytecode was written).

Goal (issue 51): median ratio ≤ 0.65 (issue 2's was ≤ 2).

    .venv/bin/python benchmarks/audit_vs_systemctl.py [--pairs 31] [--root ROOT] [--cpu]
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from speed import cloud_rootfs

GOAL = 0.65


def timed(cmd: list[str], *, cpu: bool, ok_codes: tuple[int, ...]) -> float:
    """Seconds of one run of ``cmd``: wall time, or the child's CPU time (user + system) with ``cpu``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode not in ok_codes:
        raise SystemExit(f"{cmd[0]} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    if not cpu:
        return elapsed
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=31)
    parser.add_argument("--root", type=Path)
    parser.add_argument("--cpu", action="store_true", help="CPU time (user+sys) instead of wall time")
    args = parser.parse_args()
    root = args.root or cloud_rootfs()
    import imagelint

    compileall.compile_dir(str(Path(imagelint.__file__).parent), quiet=1)
    imagelint_cmd = str(Path(sys.executable).parent / "imagelint")
    systemctl = [shutil.which("systemctl") or "systemctl", f"--root={root}", "list-unit-files", "--no-pager"]
    audit = [imagelint_cmd, "audit", str(root), "-f", "json:/dev/null"]
    for cmd, codes in ((systemctl, (0,)), (audit, (0, 1))):  # warm-up: page cache, kept rule packs
        timed(cmd, cpu=args.cpu, ok_codes=codes)
    load = os.getloadavg()
    clock = "CPU time" if args.cpu else "wall time"
    print(f"image: {root}; {clock}, {args.pairs} pairs; load {load[0]:.2f} {load[1]:.2f}")
    ratios, ours, baseline = [], [], []
    for _ in range(args.pairs):
        baseline.append(timed(systemctl, cpu=args.cpu, ok_codes=(0,)))
        ours.append(timed(audit, cpu=args.cpu, ok_codes=(0, 1)))
        ratios.append(ours[-1] / baseline[-1])
    q1, median, q3 = quartiles(ratios)
    verdict = "meets" if median <= GOAL else "MISSES"
    print(
        f"imagelint audit: {statistics.median(ours) * 1000:.1f} ms; systemctl --root list-unit-files: "
        f"{statistics.median(baseline) * 1000:.1f} ms (medians)"
    )
    print(
        f"ratio per pair: median {median:.2f} (quartiles {q1:.2f}-{q3:.2f}, range {min(ratios):.2f}-"
        f"{max(ratios):.2f}) ({verdict} goal ≤ {GOAL})"
    )
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f}")


if __name__ == "__main__":
    main()
