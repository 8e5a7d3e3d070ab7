"""The common paths' speed in one run, each figure a ratio against its baseline, and where the time goes.

Whole processes, medians of ``--runs`` runs after a warm-up, on the realistic cloud image the tests
build (294 units, ~340 packages: ``scripts/build-test-rootfs.sh cloud``), or a root given with
``--root``:

- ``imagelint units ROOT`` (text, to a pipe) against ``systemctl --root ROOT list-unit-files``
  (issue 26's goal: ≤ 0.5x);
- ``imagelint audit ROOT -f json:/dev/null`` (all built-in packs) against the same systemctl call
  (goal ≤ 1.0x), and its peak RSS (goal: no higher than 43 MiB);
- ``imagelint --version`` against ``python -c pass`` of the same interpreter (goal ≤ 1.3x).

The journal path has its own benchmark (``benchmarks/journal_vs_journalctl.py``: it builds a
1,000,000-entry journal first). Then a profile of one in-process audit: the functions with the most
time of their own, so that the next regression is seen in minutes.

    .venv/bin/python benchmarks/speed.py [--runs 9] [--root ROOT] [--top 15] [--cpu]

``--cpu`` times each command by its CPU time (user + system) instead of wall time: on a machine
busy with other work the ratios stay meaningful. The load average is printed before and after.
The imagelint package that is timed (the one ``PYTHONPATH`` names, else the installed one) is
compiled to bytecode first, as an installed package is: under ``PYTHONDONTWRITEBYTECODE`` nothing
would be cached, and every run would pay for compiling imagelint's modules.
"""

from __future__ import annotations

import argparse
import compileall
import cProfile
import os
import pstats
import shutil
import subprocess
import sys
from pathlib import Path

from _timing import REPO, median_wall, report

sys.path.insert(0, str(REPO))
from tests.treerss import run_tree

MIB = 1024 * 1024


def cloud_rootfs() -> Path:
    """The cached cloud image the tests use (built on first use; needs root)."""
    script = REPO / "scripts/build-test-rootfs.sh"
    out = subprocess.run(
        ["bash", str(script), "--flavour", "cloud"], capture_output=True, text=True, check=True
    )
    return Path(out.stdout.strip().splitlines()[-1])


def peak_rss(cmd: list[str]) -> int:
    """Peak RSS in bytes of ``cmd``'s process tree (``tests/treerss.py``: the CLI's boxed child included)."""
    run = run_tree(cmd, timeout=3600)
    if run.returncode is None:
        raise SystemExit(f"{cmd[:3]} did not end")
    return run.peak_kib * 1024


def profile(root: Path, top: int) -> None:
    from imagelint.openers import open_spec
    from imagelint.session import RunOptions, audit_opened, prepare

    profiler = cProfile.Profile()
    profiler.enable()
    run = prepare(RunOptions(outputs=[]))
    with open_spec(str(root)) as opened:
        audit_opened(run, opened)
    profiler.disable()
    print(
        f"\nprofile of one in-process audit (rules loaded, image opened and audited), top {top} by own time:"
    )
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--root", type=Path)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--cpu", action="store_true", help="CPU time (user+sys) instead of wall time")
    args = parser.parse_args()
    root = args.root or cloud_rootfs()
    import imagelint

    compileall.compile_dir(str(Path(imagelint.__file__).parent), quiet=1)
    imagelint = str(Path(sys.executable).parent / "imagelint")
    systemctl = shutil.which("systemctl") or "systemctl"
    load = os.getloadavg()
    clock = "CPU time" if args.cpu else "wall time"
    print(f"image: {root}; {clock}, median of {args.runs} runs each; load {load[0]:.2f} {load[1]:.2f}")

    def median(cmd: list[str], ok_codes: tuple[int, ...] = (0,)) -> float:
        return median_wall(cmd, args.runs, ok_codes=ok_codes, cpu=args.cpu)

    baseline = median([systemctl, f"--root={root}", "list-unit-files", "--no-pager"])
    units = median([imagelint, "units", str(root)])
    report("imagelint units (text)", units, "systemctl --root list-unit-files", baseline, goal=0.5)
    audit_cmd = [imagelint, "audit", str(root), "-f", "json:/dev/null"]
    audit = median(audit_cmd, ok_codes=(0, 1))
    report("imagelint audit -f json:/dev/null", audit, "systemctl --root list-unit-files", baseline, goal=1.0)
    python = median([sys.executable, "-c", "pass"])
    version = median([imagelint, "--version"])
    report("imagelint --version", version, "python -c pass", python, goal=1.3)
    rss = peak_rss(audit_cmd)
    print(f"imagelint audit peak RSS: {rss / MIB:.1f} MiB (goal ≤ 43 MiB)")
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f}")
    profile(root, args.top)


if __name__ == "__main__":
    main()
