"""`imagelint diff ebs:snap-OLD ebs:snap-NEW`: NEW read through ListChangedBlocks against in full.

The real Debian image with the sample faults planted and a vendor's agent installed (not enabled) is
made into a GPT disk (EFI + ext4, 640 MiB) and uploaded to moto's EBS direct API as OLD; a vendor
update (the agent enabled at boot, its package added to the dpkg status file) is applied to a copy
of the disk in place with ``debugfs -w`` and uploaded as OLD's child, NEW. With 50 ms added to every
GetSnapshotBlock (the moto front sleeps), the CLI diffs the pair twice:

- incremental: NEW through ListChangedBlocks, its unchanged blocks served from OLD's;
- full: the same pair with ListChangedBlocks refused by the front (AccessDenied), so NEW is read in
  full as before this change (the diff says so and why);
- next release with the audit cache: OLD's audit kept by an earlier run (its own gate), so OLD is not
  read at all and NEW is read in full (OLD's blocks were not read in this run: nothing to reuse).

The first two runs have the audit cache off (``IMAGELINT_NO_CACHE=1``). The floor is the audit of
NEW's disk image file (no network at all).

Printed: the blocks ListChangedBlocks names and those the walk of NEW needs among them (an audit of
NEW's disk file through a counting stream, the same disk target code), GetSnapshotBlock calls on NEW
in each run (counted by the server) and their ratio to the changed blocks needed (goal ≤ 1.2), the
wall time of both diffs and their ratio, and NEW's own read (from the CLI's progress lines: its
listing, reads and audit) in each.

Run: .venv/bin/python benchmarks/ebs_diff.py
"""

from __future__ import annotations

import json
import os
import re
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
IMAGELINT = str(Path(sys.executable).parent / "imagelint")


def timed_diff(
    aws: MotoEnv, old: str, new: str, out: Path, cache: Path | None = None
) -> tuple[float, dict[str, Any], float]:
    """Wall time, the diff's JSON, and NEW's own read time (its progress line's elapsed seconds)."""
    kept = (
        {"IMAGELINT_NO_CACHE": "1"}
        if cache is None
        else {"IMAGELINT_NO_CACHE": "", "XDG_CACHE_HOME": str(cache)}
    )
    started = time.perf_counter()
    proc = subprocess.run(
        [IMAGELINT, "diff", old, new, "-f", f"json:{out}"],
        env={**os.environ, **aws.env, "NO_COLOR": "1", **kept},
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"imagelint diff exited {proc.returncode}: {proc.stderr[-800:]}")
    side = re.findall(rf"\+\s*([\d.]+)s {new}: read ", proc.stderr)
    return elapsed, json.loads(out.read_text()), float(side[-1]) if side else float("nan")


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
        [IMAGELINT, "audit", str(new_disk), "-f", "json:/dev/null"], capture_output=True, check=False
    )
    floor = time.perf_counter() - started
    with MotoEnv() as aws:
        ebs = aws.client("ebs")  # through the front: it notes the lineage
        old, written = upload_image(ebs, old_disk)
        new, _ = upload_image(ebs, new_disk, parent=old)
        old, new = f"ebs:{old}", f"ebs:{new}"
        aws.ebs.reset()
        aws.ebs.latency = LATENCY
        inc_s, inc, inc_new_s = timed_diff(aws, old, new, work / "incremental.json")
        inc_gets = [i for s, i in aws.ebs.snapshot_gets if f"ebs:{s}" == new]
        inc_old_gets = [i for s, i in aws.ebs.snapshot_gets if f"ebs:{s}" == old]
        aws.ebs.reset()
        aws.ebs.latency = LATENCY
        aws.ebs.deny = "changed"
        full_s, full, full_new_s = timed_diff(aws, old, new, work / "full.json")
        full_gets = [i for s, i in aws.ebs.snapshot_gets if f"ebs:{s}" == new]
        aws.ebs.deny = None
        timed_diff(aws, old, old, work / "warm.json", work / "cache")  # the last release's own gate
        aws.ebs.reset()
        aws.ebs.latency = LATENCY
        cached_s, cached, _ = timed_diff(aws, old, new, work / "cached.json", work / "cache")
        cached_gets = len(aws.ebs.snapshot_gets)
    blocks = inc["new"]["blocks"]
    same = [c["detail"] for c in inc["changes"]] == [c["detail"] for c in full["changes"]]
    same = same and [c["detail"] for c in cached["changes"]] == [c["detail"] for c in full["changes"]]
    print(f"snapshots: {written} blocks allocated in OLD; the update differs in {len(changed)} blocks")
    print(
        f"incremental: ListChangedBlocks names {blocks['changed_blocks']} blocks, the walk of NEW needs "
        f"{len(needed)} of them; GetSnapshotBlock on NEW {len(inc_gets)} "
        f"(ratio {len(inc_gets) / max(1, len(needed)):.2f}, goal ≤ 1.2), blocks reused from OLD "
        f"{len(blocks['reused'])}, fetched from OLD again {len(blocks['base_fetched'])} "
        f"(GetSnapshotBlock on OLD in the whole run: {len(inc_old_gets)})"
    )
    print(f"full: GetSnapshotBlock on NEW {len(full_gets)} (fallback: {full['new']['blocks']['fallback']})")
    print(
        f"+{LATENCY * 1000:.0f} ms per GetSnapshotBlock: whole diff incremental {inc_s:.2f} s, full "
        f"{full_s:.2f} s, ratio {inc_s / full_s:.2f}; NEW's read alone incremental {inc_new_s:.2f} s, "
        f"full {full_new_s:.2f} s, ratio {inc_new_s / full_new_s:.2f} (goal < 0.25); "
        f"{'the same changes' if same else 'DIFFERENT CHANGES'} ({len(inc['changes'])})"
    )
    print(
        f"next release, OLD's audit in the cache ({cached['old']['source']}): {cached_s:.2f} s, "
        f"GetSnapshotBlock {cached_gets}; ratio to the full diff {cached_s / full_s:.2f}; floor (audit of "
        f"NEW's disk image file, no network) {floor:.2f} s"
    )
    subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    main()
