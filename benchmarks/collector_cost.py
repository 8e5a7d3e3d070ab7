"""What the remote collector's soak costs the instance: CPU per second of soak, against 1% of one core.

The real ``collect.sh`` runs on this host (an empty tree as the image, the plan ``ami``/``fleet``
send, a soak of ``--seconds`` at ``--interval``) and records its own cost with the shell's ``times``
(its own and its children's user + system time, so every ``cat``, ``date`` and ``sleep`` it starts
counts): the whole soak, and the per-CPU reader's share (``/proc/stat`` ten times a second). Printed
as a share of one core and as a ratio against the goal (issue 28: at most 1% of one core during a
10-minute soak), with the reader's mode (``bash``: no process per read; ``sh``: one ``sleep`` a read).

    .venv/bin/python benchmarks/collector_cost.py [--seconds 600] [--interval 5] [--shell sh]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

from imagelint.bundle.probes import shell_times
from imagelint.collector import script_text
from imagelint.collector.plan import instance_plan
from imagelint.session import RunOptions, prepare

GOAL = 0.01  # of one core


def _times(line: str) -> float:
    return sum(shell_times(line.partition(" ")[2], "soak/cost"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--interval", type=float, default=5)
    parser.add_argument("--shell", default="sh", help="the shell that runs collect.sh (sh is dash on Debian)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="imagelint-cost-") as scratch:
        work = Path(scratch)
        (work / "root/etc").mkdir(parents=True)
        plan = instance_plan(
            *prepare(RunOptions(outputs=[])).rules, soak_seconds=args.seconds, soak_interval=args.interval
        )
        (work / "plan.txt").write_text(plan.text() + f"root {work / 'root'}\nshow 0\n")
        (work / "collect.sh").write_text(script_text())
        subprocess.run([args.shell, str(work / "collect.sh"), str(work)], check=True, capture_output=True)
        lines = (work / "stage/imagelint/soak/cost").read_text().splitlines()
        cost = {line.split(" ", 1)[0]: line for line in lines}
        mode = (work / "stage/imagelint/soak/cpu").read_text().splitlines()[0].split()[1]
    total = _times(cost["times-after"]) - _times(cost["times-before"])
    reader = _times(cost.get("reader-times", "reader-times"))
    share = total / args.seconds
    print(f"soak {args.seconds:g} s, cgroup samples every {args.interval:g} s, per-CPU reader mode {mode}")
    print(f"collector CPU during the soak: {total:.3f} s = {share * 100:.3f}% of one core")
    print(f"  of which the per-CPU reader (10 reads/s): {reader:.3f} s = {reader / args.seconds * 100:.3f}%")
    verdict = "meets" if share <= GOAL else "MISSES"
    print(f"ratio against the goal (1% of one core): {share / GOAL:.2f}x ({verdict})")


if __name__ == "__main__":
    main()
