"""A full offline audit of an EBS snapshot read in place (`imagelint ami AMI --mode snapshot`).

The real Debian image with the sample faults planted is made into a GPT disk (EFI + ext4, 640 MiB),
written to a snapshot on moto's EBS direct API (zero blocks skipped, as uploaders do) and an AMI is
registered on it. Then, in the same run:

(a) blocks fetched as a share of the snapshot's allocated blocks (goal ≤ 5%), with the blocks each
    rule added (the first rule to touch a block is charged for it; measured in-process on the image
    file through a counting stream, the same disk target code);
(b) wall time of the full audit with 50 ms added to every GetSnapshotBlock (the moto front sleeps):
    default concurrency (16) against concurrency 1 (serial) — goal ≤ 10 s — and the directory audit
    of the same tree as the floor.

Run: .venv/bin/python benchmarks/ebs_snapshot.py
"""

from __future__ import annotations

import collections
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _timing import REPO, test_rootfs

sys.path.insert(0, str(REPO))

from tests.aws.disk_image import gpt_ext4_image, plant_sample_faults
from tests.aws.ebs_upload import register_image, upload_image
from tests.aws.moto_env import MotoEnv

BLOCK = 524288
LATENCY = 0.05
IMAGELINT = str(Path(sys.executable).parent / "imagelint")


class CountingFile(io.RawIOBase):
    """The image file, noting which 512 KiB blocks each rule reads first."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.f = path.open("rb")
        self.size = path.stat().st_size
        self.tag = "open"
        self.first: dict[int, str] = {}

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.f.seek(offset, whence)

    def tell(self) -> int:
        return self.f.tell()

    def readinto(self, buffer: Any) -> int:
        pos = self.f.tell()
        n = self.f.readinto(buffer)
        for index in range(pos // BLOCK, (pos + max(n, 1) - 1) // BLOCK + 1):
            self.first.setdefault(index, self.tag)
        return n


def blocks_by_rule(disk: Path) -> collections.Counter[str]:
    import imagelint.engine as engine
    from imagelint.session import RunOptions, prepare
    from imagelint.targets.disk import open_disk_target

    stream = CountingFile(disk)
    target = open_disk_target(stream, description=str(disk))
    packs, config = prepare(RunOptions())
    evaluate = engine._evaluate

    def tagged(ctx: Any, rule: Any, errors: Any) -> Any:
        stream.tag = rule.id
        return evaluate(ctx, rule, errors)

    engine._evaluate = tagged  # type: ignore[assignment]
    try:
        engine.audit(target, packs, config, engine.RunSettings())
    finally:
        engine._evaluate = evaluate  # type: ignore[assignment]
    return collections.Counter(stream.first.values())


def timed_audit(aws: MotoEnv, image_id: str, out: Path, *extra: str) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    proc = subprocess.run(
        [IMAGELINT, "ami", image_id, "--mode", "snapshot", "-f", f"json:{out}", *extra],
        env={**os.environ, **aws.env, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"imagelint ami exited {proc.returncode}: {proc.stderr[-800:]}")
    return elapsed, json.loads(out.read_text())


def main() -> None:
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    work = Path(tempfile.mkdtemp(prefix="imagelint-ebs-bench-"))
    tree = work / "rootfs"
    subprocess.run(["cp", "-a", str(test_rootfs()), str(tree)], check=True)
    plant_sample_faults(tree)
    disk = gpt_ext4_image(tree, work / "disk.img")
    started = time.perf_counter()
    subprocess.run([IMAGELINT, "audit", str(tree), "-f", "json:/dev/null"], capture_output=True, check=False)
    directory = time.perf_counter() - started
    with MotoEnv() as aws:
        snapshot_id, written = upload_image(aws.client("ebs", direct=True), disk)
        image_id = register_image(aws.client("ec2"), snapshot_id)
        _, report = timed_audit(aws, image_id, work / "a.json")
        io_stats = report["facts"]["disk"]["io"]
        aws.ebs.latency = LATENCY
        parallel, report16 = timed_audit(aws, image_id, work / "b.json")
        serial, report1 = timed_audit(aws, image_id, work / "c.json", "--concurrency", "1")
    share = io_stats["blocks_fetched"] / io_stats["blocks_listed"]
    print(
        f"snapshot: {written} blocks allocated of {io_stats['volume_bytes'] // BLOCK} ({disk.name}, 640 MiB)"
    )
    print(
        f"(a) blocks fetched: {io_stats['blocks_fetched']} of {io_stats['blocks_listed']} allocated = "
        f"{share:.1%} ({'meets' if share <= 0.05 else 'MISSES'} goal ≤ 5%); "
        f"{io_stats['bytes_fetched'] / 2**20:.1f} MiB, cache hits {io_stats['cache_hits']}, "
        f"read-ahead {io_stats['readahead_blocks']}"
    )
    charged = blocks_by_rule(disk)
    print(
        "    blocks by the first rule to read them: "
        + ", ".join(f"{k} {v}" for k, v in charged.most_common())
    )
    without = sum(v for k, v in charged.items() if k != "IL109")
    print(
        f"    without IL109 (recursive permission walk of /etc /usr ...): {without} = {without / written:.1%}"
    )
    fetched16, fetched1 = (
        report16["facts"]["disk"]["io"]["blocks_fetched"],
        report1["facts"]["disk"]["io"]["blocks_fetched"],
    )
    print(
        f"(b) +{LATENCY * 1000:.0f} ms per GetSnapshotBlock: "
        f"concurrency 16 {parallel:.2f} s ({fetched16} blocks), "
        f"concurrency 1 {serial:.2f} s ({fetched1} blocks); serial/parallel ratio {serial / parallel:.2f}; "
        f"{'meets' if parallel <= 10 else 'MISSES'} goal ≤ 10 s"
    )
    ratio = parallel / directory
    print(f"    directory audit of the same tree: {directory:.2f} s (snapshot/directory {ratio:.2f})")
    subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    main()
