"""Benchmark: ``imagelint diff OLD NEW`` of two directory images vs one ``imagelint audit``.

Both are timed as whole processes (interpreter start-up included), median of N runs after one
warm-up, in the same run: the diff audits both images with the built-in rules, builds both
inventories and compares them, so the goal is at most 2.5× one audit of the larger image. Also
printed, in-process: the inventory's own cost (built from an audit's already-built unit index)
against one engine audit, to show it is built cheaply from the run's shared facts.

Images: the cached test images (``bookworm`` vs ``bookworm-vendor``, built by
``scripts/build-test-rootfs.sh``; needs root on first build), or two roots given as arguments.

    .venv/bin/python benchmarks/diff_vs_audit.py [OLD NEW] [-n 7]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from _timing import REPO, median_wall, report


def inventory_cost(root: Path, runs: int) -> tuple[float, float]:
    """In this process: median seconds of one engine audit, and of building the inventory alone
    from that audit's already-built unit index (its marginal cost inside the audit)."""
    import statistics
    import time

    from imagelint.checks import CheckContext
    from imagelint.checks.systemd import image_inventory, unit_index
    from imagelint.config import Config
    from imagelint.engine import RunSettings, audit
    from imagelint.rulepacks import builtin_pack_paths, load_packs
    from imagelint.targets import RootfsTarget

    packs = load_packs([], builtin=builtin_pack_paths())
    audits, inventories = [], []
    for _ in range(runs):
        started = time.perf_counter()
        audit(RootfsTarget(root), packs, Config(), RunSettings())
        audits.append(time.perf_counter() - started)
        ctx = CheckContext.for_target(RootfsTarget(root))
        unit_index(ctx)
        started = time.perf_counter()
        image_inventory(ctx)
        inventories.append(time.perf_counter() - started)
    return statistics.median(audits), statistics.median(inventories)


def built(flavour: str) -> Path:
    out = subprocess.run(
        ["bash", str(REPO / "scripts/build-test-rootfs.sh"), "--flavour", flavour],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return Path(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("roots", nargs="*", type=Path)
    parser.add_argument("-n", type=int, default=7, help="runs of each command (default 7)")
    args = parser.parse_args()
    old, new = args.roots if len(args.roots) == 2 else (built("minimal"), built("vendor"))
    exe = str(Path(sys.executable).parent / "imagelint")
    diff = median_wall([exe, "diff", str(old), str(new), "-f", "json"], args.n, ok_codes=(0, 1))
    audit = median_wall([exe, "audit", str(new), "-f", "json"], args.n, ok_codes=(0, 1))
    engine, inventory = inventory_cost(new, args.n)
    print(f"images: {old} → {new}")
    report("imagelint diff", diff, "imagelint audit", audit, 2.5)
    share = inventory / engine * 100
    print(f"inventory: {inventory * 1000:.1f} ms of a {engine * 1000:.1f} ms engine audit ({share:.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
