"""A full offline audit of an EBS snapshot read in place (`imagelint ami AMI --mode snapshot`).

The real Debian image with the sample faults planted is made into a GPT disk (EFI + ext4, 640 MiB),
written to a snapshot on moto's EBS direct API (zero blocks skipped, as uploaders do) and an AMI is
registered on it. Then, in the same run:

(a) blocks fetched as a share of the snapshot's allocated blocks (goal ≤ 5%; prefetched blocks
    count as fetched, read or not), the distinct blocks the server was asked for and what the
    prefetch did, with the blocks each rule reads (the first rule to touch a block is charged for
    it; measured in-process on the image file through a counting stream without hints, the same
    disk target code), and the floor IL109's recursive walk sets: the distinct 512 KiB blocks that
    the directory blocks of the walked trees and the used inode tables occupy, from debugfs and
    dumpe2fs on the image;
(b) wall time of the full audit with 50 ms added to every GetSnapshotBlock (the moto front sleeps):
    default concurrency (16) against concurrency 1 (serial) — goal ≤ 10 s — and the directory audit
    of the same tree as the floor;
(c) the same audit in-process through the real SnapshotStream at concurrency 16, with the disk
    target's read hints and without them (the stream behind a wrapper that has no ``prefetch``).

Run: .venv/bin/python benchmarks/ebs_snapshot.py
"""

from __future__ import annotations

import collections
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

from tests.aws.disk_image import ROOT_START, gpt_ext4_image, plant_sample_faults
from tests.aws.ebs_upload import register_image, upload_image
from tests.aws.moto_env import MotoEnv
from tests.aws.snapshot_streams import NoPrefetch, ReadBlocks

BLOCK = 524288
LATENCY = 0.05
IMAGELINT = str(Path(sys.executable).parent / "imagelint")
WALKED = ["/etc", "/usr", "/boot", "/opt", "/bin", "/sbin", "/lib", "/lib64"]  # IL109's paths


class CountingFile(ReadBlocks):
    """The image file, noting which 512 KiB blocks each rule reads first."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.tag = "open"
        self.first: dict[int, str] = {}

    def readinto(self, buffer: Any) -> int:
        pos = self.f.tell()
        n = super().readinto(buffer)
        for index in range(pos // BLOCK, (pos + max(n, 1) - 1) // BLOCK + 1):
            self.first.setdefault(index, self.tag)
        return n


def blocks_by_rule(disk: Path) -> collections.Counter[str]:
    import imagelint.engine as engine
    from imagelint.session import RunOptions, prepare
    from imagelint.targets.disk import open_disk_target

    stream = CountingFile(disk)
    target = open_disk_target(stream, description=str(disk))
    packs, config = prepare(RunOptions()).rules
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


def _debugfs(device: str, commands: list[str]) -> dict[str, list[str]]:
    proc = subprocess.run(
        ["debugfs", "-f", "-", device], input="\n".join(commands) + "\n", capture_output=True, text=True
    )
    out: dict[str, list[str]] = {}
    current: list[str] = []
    for line in proc.stdout.splitlines():
        if line.startswith("debugfs: "):
            current = out.setdefault(line[len("debugfs: ") :], [])
        else:
            current.append(line)
    return out


def walk_floor(disk: Path) -> dict[str, int]:
    """The 512 KiB blocks IL109's walk cannot avoid: those holding the data blocks of every directory
    it lists (debugfs) and the used part of the inode tables (dumpe2fs)."""
    device = f"{disk}?offset={ROOT_START}"
    dump = subprocess.run(["dumpe2fs", device], capture_output=True, text=True, check=True).stdout
    block_size = int(re.search(r"^Block size:\s+(\d+)", dump, re.M).group(1))
    per_group = int(re.search(r"^Inodes per group:\s+(\d+)", dump, re.M).group(1))
    inode_size = int(re.search(r"^Inode size:\s+(\d+)", dump, re.M).group(1))
    tables: set[int] = set()
    for group in re.split(r"\n(?=Group \d+:)", dump)[1:]:
        unused = re.search(r"(\d+) unused inodes", group)
        used = per_group - int(unused.group(1) if unused else 0)
        if "INODE_UNINIT" in group.splitlines()[0]:
            used = 0
        start = ROOT_START + int(re.search(r"Inode table at (\d+)-", group).group(1)) * block_size
        if used:
            tables |= set(range(start // BLOCK, (start + used * inode_size - 1) // BLOCK + 1))
    stats = _debugfs(device, [f"stat {top}" for top in WALKED])
    level = [top for top in WALKED if "Type: directory" in "\n".join(stats.get(f"stat {top}", []))]
    dirs: list[str] = []
    while level:
        dirs += level
        listing = _debugfs(device, [f"ls -p {d}" for d in level])
        below = []
        for d in level:
            for line in listing.get(f"ls -p {d}", []):
                fields = line.split("/")  # /inode/mode/uid/gid/name/size/
                is_dir = len(fields) >= 7 and fields[2] and int(fields[2], 8) & 0o170000 == 0o040000
                if is_dir and fields[5] not in (".", ".."):
                    below.append(f"{d.rstrip('/')}/{fields[5]}")
        level = below
    blocks = _debugfs(device, [f"blocks {d}" for d in dirs])
    fs_blocks = {int(b) for d in dirs for line in blocks.get(f"blocks {d}", []) for b in line.split()}
    directory = {(ROOT_START + b * block_size) // BLOCK for b in fs_blocks}
    return {
        "dirs": len(dirs),
        "fs_blocks": len(fs_blocks),
        "fs_bytes": len(fs_blocks) * block_size,
        "directory": len(directory),
        "tables": len(tables),
        "both": len(directory | tables),
    }


def in_process(aws: MotoEnv, snapshot_id: str, hinted: bool) -> tuple[float, dict[str, int], str]:
    """Seconds of the audit through the real stream (concurrency 16), its counters, its findings."""
    import imagelint.engine as engine
    from imagelint.aws.clients import Clients
    from imagelint.aws.ebs_api import EbsApi
    from imagelint.aws.ebs_blocks import SnapshotStream
    from imagelint.session import RunOptions, prepare
    from imagelint.targets.disk import open_disk_target
    from tests.aws.moto_env import REGION

    os.environ.update(aws.env)
    packs, config = prepare(RunOptions()).rules
    started = time.perf_counter()
    with SnapshotStream(EbsApi(Clients(REGION).ebs(16), snapshot_id)) as stream:
        disk = stream if hinted else NoPrefetch(stream)
        report = engine.audit(open_disk_target(disk, description="snap"), packs, config, engine.RunSettings())
        stream.raise_if_failed()
        counts = stream.stats()
    elapsed = time.perf_counter() - started
    return elapsed, counts, json.dumps(report.to_dict()["findings"], sort_keys=True)


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
        aws.ebs.reset()
        _, report = timed_audit(aws, image_id, work / "a.json")
        io_stats = report["facts"]["disk"]["io"]
        asked, distinct = len(aws.ebs.gets), len(set(aws.ebs.gets))
        aws.ebs.latency = LATENCY
        parallel, report16 = timed_audit(aws, image_id, work / "b.json")
        serial, report1 = timed_audit(aws, image_id, work / "c.json", "--concurrency", "1")
        plain_s, plain_io, plain_findings = in_process(aws, snapshot_id, hinted=False)
        hinted_s, hinted_io, hinted_findings = in_process(aws, snapshot_id, hinted=True)
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
    print(
        f"    GetSnapshotBlock calls {asked}, distinct blocks {distinct} (fetched again after eviction from "
        f"the {io_stats['cache_bytes'] // 2**20} MiB cache: {asked - distinct}); prefetched "
        f"{io_stats.get('prefetch_blocks', 0)}, dropped at the bound {io_stats.get('prefetch_dropped', 0)}, "
        f"prefetched but never read {io_stats.get('prefetch_unread', 0)}"
    )
    charged = blocks_by_rule(disk)
    print(
        "    blocks by the first rule to read them (no hints): "
        + ", ".join(f"{k} {v}" for k, v in charged.most_common())
    )
    without = sum(v for k, v in charged.items() if k != "IL109")
    print(
        f"    without IL109 (recursive permission walk of /etc /usr ...): {without} = {without / written:.1%}"
    )
    floor = walk_floor(disk)
    print(
        f"    IL109's floor: {floor['dirs']} directories walked, their {floor['fs_blocks']} directory "
        f"blocks ({floor['fs_bytes'] / 2**20:.1f} MiB) lie in {floor['directory']} distinct 512 KiB blocks, "
        f"the used inode tables in {floor['tables']}: {floor['both']} together = "
        f"{floor['both'] / written:.1%} of allocated, each of which a full walk must read"
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
    same = "the same findings" if plain_findings == hinted_findings else "DIFFERENT FINDINGS"
    print(
        f"(c) in-process, concurrency 16: read hints off {plain_s:.2f} s "
        f"({plain_io['blocks_fetched']} blocks), on {hinted_s:.2f} s "
        f"({hinted_io['blocks_fetched']} blocks, {hinted_io['prefetch_blocks']} prefetched); "
        f"off/on {plain_s / hinted_s:.2f}; {same}"
    )
    subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    main()
