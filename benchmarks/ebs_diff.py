"""`imagelint diff ebs:snap-OLD ebs:snap-NEW`: full, cold incremental and warm incremental, in one run.

The real Debian image with the sample faults planted and a vendor's agent installed (not enabled) is
made into a GPT disk (EFI + ext4, 640 MiB) and uploaded to moto's EBS direct API as OLD; a vendor
update (the agent enabled at boot, its package added to the dpkg status file) is applied to a copy
of the disk in place with ``debugfs -w`` and uploaded as OLD's child, NEW. With 50 ms added to every
GetSnapshotBlock (the moto front sleeps), the CLI diffs the pair three times:

- full: ListChangedBlocks refused by the front (AccessDenied), the audit and block caches off: OLD
  and NEW read in full (the diff says so and why);
- cold incremental: nothing cached (a fresh cache directory): OLD read in full, NEW through
  ListChangedBlocks, its unchanged blocks served from OLD's reads;
- warm incremental, the release pipeline's case: OLD's audit (audit cache) and the blocks its walk
  needed (block store) kept by the previous gate, so OLD is not read and NEW's unchanged blocks come
  from the store: only NEW's changed blocks are fetched. The previous gate is stood in for by
  ``imagelint diff OLD OLD`` into the same cache directory (OLD read in full once, as the gate that
  brought it in did when it was NEW; its timing is not counted).

Printed: the blocks ListChangedBlocks names and those the walk of NEW needs among them (an audit of
NEW's disk file through a counting stream, the same disk target code), GetSnapshotBlock calls on NEW
(counted by the server) and their ratio to the changed blocks needed (goal ≤ 1.2), the wall time of
the three diffs (the CLI as a subprocess; the median of three interleaved rounds, each listed), the
ratios cold/full and warm/full (goal < 0.25), and whether all three give the same changes. The
floor is the audit of NEW's disk image file (no network).

Run: PYTHONPATH=. .venv/bin/python benchmarks/ebs_diff.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _timing import REPO, test_rootfs

sys.path.insert(0, str(REPO))

from imagelint.sampletree import build_tree
from tests.aws.disk_image import VENDOR_FILES, gpt_ext4_image, plant_sample_faults, vendor_update
from tests.aws.ebs_upload import upload_image
from tests.aws.moto_env import MotoEnv
from tests.aws.snapshot_streams import blocks_read, differing

LATENCY = 0.05
GOAL = 0.25
ROUNDS = 3


def timed_diff(
    aws: MotoEnv, old: str, new: str, out: Path, cache: Path | None = None
) -> tuple[float, dict[str, Any]]:
    """Wall time and the diff's JSON (audit and block caches off, or every cache in ``cache``)."""
    kept = (
        {"IMAGELINT_NO_CACHE": "audits,blocks"}  # kept rule packs stay on: a gate has them
        if cache is None
        else {"IMAGELINT_NO_CACHE": "", "XDG_CACHE_HOME": str(cache)}
    )
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "imagelint", "diff", old, new, "-f", f"json:{out}"],
        env={**os.environ, **aws.env, "NO_COLOR": "1", "PYTHONPATH": str(REPO), **kept},
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"imagelint diff exited {proc.returncode}: {proc.stderr[-800:]}")
    return elapsed, json.loads(out.read_text())


def gets(aws: MotoEnv, spec: str) -> list[int]:
    return [i for s, i in aws.ebs.snapshot_gets if f"ebs:{s}" == spec]


def main() -> None:
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    work = Path(tempfile.mkdtemp(prefix="imagelint-ebs-diff-"))
    tree = work / "rootfs"
    subprocess.run(["cp", "-a", str(test_rootfs()), str(tree)], check=True)
    build_tree(plant_sample_faults(tree), VENDOR_FILES)
    old_disk = gpt_ext4_image(tree, work / "old.img")
    new_disk = vendor_update(old_disk, work / "new.img", tree, work)
    changed = differing(old_disk, new_disk)
    needed = blocks_read(new_disk) & changed
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "imagelint", "audit", str(new_disk), "-f", "json:/dev/null"],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        check=False,
    )
    floor = time.perf_counter() - started
    with MotoEnv() as aws:
        ebs = aws.client("ebs")  # through the front: it notes the lineage
        old, written = upload_image(ebs, old_disk)
        new, _ = upload_image(ebs, new_disk, parent=old)
        old, new = f"ebs:{old}", f"ebs:{new}"

        times: dict[str, list[float]] = {"full": [], "cold": [], "warm": []}
        for round_ in range(ROUNDS):  # interleaved: the machine's load falls on all three alike
            aws.ebs.reset()
            aws.ebs.latency = LATENCY
            aws.ebs.deny = "changed"
            full_s, full = timed_diff(aws, old, new, work / "full.json")
            full_gets = gets(aws, new)
            aws.ebs.deny = None

            aws.ebs.reset()
            aws.ebs.latency = LATENCY
            cold_s, cold = timed_diff(aws, old, new, work / "cold.json", work / f"cold-cache-{round_}")
            cold_gets, cold_old_gets = gets(aws, new), gets(aws, old)

            aws.ebs.reset()
            warm_cache = work / f"warm-cache-{round_}"
            timed_diff(aws, old, old, work / "previous.json", warm_cache)  # the previous gate
            aws.ebs.reset()
            aws.ebs.latency = LATENCY
            warm_s, warm = timed_diff(aws, old, new, work / "warm.json", warm_cache)
            warm_gets, warm_old_gets = gets(aws, new), gets(aws, old)
            for name, seconds in (("full", full_s), ("cold", cold_s), ("warm", warm_s)):
                times[name].append(seconds)

    def details(result: dict[str, Any]) -> list[str]:
        return [c["detail"] for c in result["changes"]]

    same = details(cold) == details(full) == details(warm)
    cold_blocks = cold["new"]["blocks"]
    print(f"snapshots: {written} blocks allocated in OLD; the update differs in {len(changed)} blocks")
    print(
        f"ListChangedBlocks names {cold_blocks['changed_blocks']} blocks; the walk of NEW needs "
        f"{len(needed)} of them"
    )
    for name, result, new_gets, old_gets in (
        ("cold incremental", cold, cold_gets, cold_old_gets),
        ("warm incremental", warm, warm_gets, warm_old_gets),
    ):
        blocks = result["new"]["blocks"]
        from_store = len(set(blocks["stored"]) & set(blocks["reused"]))
        print(
            f"{name}: GetSnapshotBlock on NEW {len(new_gets)} (ratio to changed blocks needed "
            f"{len(new_gets) / max(1, len(needed)):.2f}, goal ≤ 1.2); on OLD {len(old_gets)}; NEW's "
            f"unchanged blocks reused {len(blocks['reused'])} (from the block store "
            f"{from_store}), fetched from OLD {len(blocks['base_fetched'])}; "
            f"OLD's audit from {result['old']['source']}"
        )
    print(f"full: GetSnapshotBlock on NEW {len(full_gets)} (fallback: {full['new']['blocks']['fallback']})")
    full_s, cold_s, warm_s = (statistics.median(times[k]) for k in ("full", "cold", "warm"))
    cold_ratio, warm_ratio = cold_s / full_s, warm_s / full_s
    rounds = ", ".join(f"{k} " + " ".join(f"{t:.2f}" for t in v) for k, v in times.items())
    print(
        f"+{LATENCY * 1000:.0f} ms per GetSnapshotBlock, whole diff wall time, median of {ROUNDS} "
        f"interleaved rounds (each: {rounds} s): full {full_s:.2f} s, cold incremental {cold_s:.2f} s, "
        f"warm incremental {warm_s:.2f} s; "
        f"floor (audit of NEW's disk image file, no network) {floor:.2f} s"
    )
    print(
        f"ratios: cold/full {cold_ratio:.2f} ({'meets' if cold_ratio < GOAL else 'does NOT meet'} < {GOAL}), "
        f"warm/full {warm_ratio:.2f} ({'meets' if warm_ratio < GOAL else 'does NOT meet'} < {GOAL}); "
        f"{'the same changes' if same else 'DIFFERENT CHANGES'} in all three ({len(full['changes'])})"
    )
    subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    main()
