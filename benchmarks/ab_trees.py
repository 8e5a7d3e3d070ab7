"""Before and after in one run: the figures of ``speed.py`` for two source trees, runs interleaved.

On a machine busy with other work, two runs of ``speed.py`` minutes apart do not compare; here each
run of a command with tree A is followed by the same command with tree B (``PYTHONPATH`` set to the
tree), so both see the same load, and the ratio B/A is meaningful. ``--cpu`` times by the child's
CPU time (user + system) rather than wall time. The load average is printed before and after.

Give trees with bytecode cached (``python -m compileall -q TREE/imagelint``; a checkout made under
``PYTHONDONTWRITEBYTECODE`` has none, and every run would pay for compiling imagelint's modules):

    git -C /work/main archive main | tar -x -C /tmp/a && git archive HEAD | tar -x -C /tmp/b
    python -m compileall -q /tmp/a/imagelint /tmp/b/imagelint
    .venv/bin/python benchmarks/ab_trees.py /tmp/a /tmp/b [--runs 7] [--cpu] [--root ROOT]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from speed import MIB, cloud_rootfs, peak_rss


def timed(cmd: list[str], env: dict[str, str], cpu: bool) -> float:
    """Seconds of one run of ``cmd``: wall time, or the child's CPU time with ``cpu``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime if cpu else elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree_a", type=Path)
    parser.add_argument("tree_b", type=Path)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--root", type=Path)
    parser.add_argument("--cpu", action="store_true", help="CPU time (user+sys) instead of wall time")
    args = parser.parse_args()
    root = str(args.root or cloud_rootfs())
    imagelint = str(Path(sys.executable).parent / "imagelint")
    trees = {"A": args.tree_a.resolve(), "B": args.tree_b.resolve()}
    envs = {name: {**os.environ, "PYTHONPATH": str(tree)} for name, tree in trees.items()}
    commands = {
        "audit -f json:/dev/null": ([imagelint, "audit", root, "-f", "json:/dev/null"], "systemctl"),
        "units (text)": ([imagelint, "units", root], "systemctl"),
        "--version": ([imagelint, "--version"], "python -c pass"),
    }
    baselines = {
        "systemctl": ["systemctl", f"--root={root}", "list-unit-files", "--no-pager"],
        "python -c pass": [sys.executable, "-c", "pass"],
    }
    load = os.getloadavg()
    print(f"A = {trees['A']}, B = {trees['B']}; image {root}")
    print(f"{'CPU' if args.cpu else 'wall'} time, median of {args.runs} interleaved runs; load {load[0]:.2f}")
    times: dict[tuple[str, str], list[float]] = {}
    for name, cmd in [*((n, c) for n, (c, _) in commands.items()), *baselines.items()]:
        for tree in trees:
            timed(cmd, envs[tree], args.cpu)  # warm-up: page cache
        for _ in range(args.runs):
            for tree in trees:
                times.setdefault((name, tree), []).append(timed(cmd, envs[tree], args.cpu))
    median = {key: statistics.median(values) for key, values in times.items()}
    base = {n: statistics.median(times[(n, "A")] + times[(n, "B")]) for n in baselines}
    for name, (_, against) in commands.items():
        a, b = median[(name, "A")], median[(name, "B")]
        print(
            f"imagelint {name}: A {a * 1000:.1f} ms ({a / base[against]:.2f}x {against}), "
            f"B {b * 1000:.1f} ms ({b / base[against]:.2f}x); B/A {b / a:.2f}"
        )
    for name, seconds in base.items():
        print(f"{name}: {seconds * 1000:.1f} ms")
    audit = commands["audit -f json:/dev/null"][0]
    for tree in trees:
        rss = statistics.median(peak_rss_in(audit, envs[tree]) for _ in range(3))
        print(f"audit peak RSS {tree}: {rss / MIB:.1f} MiB")
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f}")


def peak_rss_in(cmd: list[str], env: dict[str, str]) -> int:
    """:func:`speed.peak_rss` with ``env`` (the tree's PYTHONPATH) for the measured child."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = env["PYTHONPATH"]
    try:
        return peak_rss(cmd)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


if __name__ == "__main__":
    main()
