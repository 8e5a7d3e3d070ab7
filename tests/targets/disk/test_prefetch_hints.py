"""Read hints of the disk target (:mod:`imagelint.targets.disk.prefetch`) on a real ext4 image, checked
against e2fsprogs: the used inode tables against ``dumpe2fs``, the directory blocks a walk hints
against ``debugfs``. The image is the faulty Debian tree as a GPT disk (EFI + ext4 made by mke2fs -d,
tests/aws/disk_image.py), the layout of the EBS snapshot tests and benchmark."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from imagelint.engine import RunSettings, audit
from imagelint.session import load_rules
from imagelint.targets.disk import open_disk_target
from imagelint.targets.disk.prefetch import ext_inode_tables
from imagelint.targets.interface import FileKind
from tests.aws.disk_image import ROOT_MIB, ROOT_START
from tests.support import need

MIB = 1024 * 1024


class HintedFile(io.RawIOBase):
    """The image file as a raw disk that takes read hints and records them (calls of byte ranges)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._f = path.open("rb")
        self.size = path.stat().st_size
        self.hints: list[list[tuple[int, int]]] = []
        self.clock = 0  # set by a test: how far it has got (hints are recorded with it)
        self.clocks: list[int] = []

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def readinto(self, buffer: Any) -> int:
        return self._f.readinto(buffer)

    def prefetch(self, ranges: Any) -> int:
        self.hints.append(list(ranges))
        self.clocks.append(self.clock)
        return 0

    def close(self) -> None:
        self._f.close()
        super().close()


class TellingFile(HintedFile):
    """The same, saying every range is in (a local file waits for nothing): the filesystem then
    lists hinted directories ahead of the walk."""

    def fetched(self, ranges: Any) -> bool:
        return True


def _e2fs(tool: str, disk: Path, *args: str) -> str:
    need(shutil.which(tool) is not None, f"{tool} (e2fsprogs) is not installed")
    proc = subprocess.run(
        [tool, *args, f"{disk}?offset={ROOT_START}"], capture_output=True, text=True, check=True
    )
    return proc.stdout


def _dumpe2fs_inode_tables(disk: Path) -> tuple[list[tuple[int, int]], int]:
    """(byte offset, length) of each group's used inode table as dumpe2fs reports it, and the block size."""
    text = _e2fs("dumpe2fs", disk)
    head = dict(re.findall(r"^([A-Z][\w ]+?):\s+(.+)$", text, re.M))
    block_size, per_group, inode_size = (
        int(head["Block size"]),
        int(head["Inodes per group"]),
        int(head["Inode size"]),
    )
    expected = []
    for group in re.split(r"\n(?=Group \d+:)", text)[1:]:
        first_line = group.splitlines()[0]
        table = int(re.search(r"Inode table at (\d+)-", group).group(1))
        unused = re.search(r"(\d+) unused inodes", group)
        used = 0 if "INODE_UNINIT" in first_line else per_group - int(unused.group(1) if unused else 0)
        if used:
            expected.append((table * block_size, used * inode_size))
    assert expected, text[:2000]
    return expected, block_size


def test_the_used_inode_tables_are_those_dumpe2fs_reports(faulty_disk: Path) -> None:
    from dissect.extfs import ExtFS
    from dissect.util.stream import RangeStream

    expected, _ = _dumpe2fs_inode_tables(faulty_disk)
    with faulty_disk.open("rb") as f:
        ext = ExtFS(RangeStream(f, ROOT_START, ROOT_MIB * MIB))
        assert ext_inode_tables(ext) == expected


def test_opening_the_disk_hints_the_inode_tables_at_the_partition(faulty_disk: Path) -> None:
    expected, _ = _dumpe2fs_inode_tables(faulty_disk)
    stream = HintedFile(faulty_disk)
    try:
        open_disk_target(stream, description="hinted")
        assert stream.hints[0] == [(ROOT_START + offset, length) for offset, length in expected]
    finally:
        stream.close()


def _debugfs_directory_blocks(disk: Path, top: str) -> dict[str, list[int]]:
    """Every directory below ``top`` (not ``top`` itself) -> its data blocks, from debugfs."""
    dirs: list[str] = []
    level = [top]
    while level:
        listing = _debugfs(disk, [f"ls -p {d}" for d in level])
        below = []
        for d in level:
            for line in listing[f"ls -p {d}"]:
                fields = line.split("/")  # /inode/mode/uid/gid/name/size/
                if len(fields) < 7 or fields[5] in (".", "..") or not fields[2]:
                    continue
                if int(fields[2], 8) & 0o170000 == 0o040000:
                    below.append(f"{d.rstrip('/')}/{fields[5]}")
        dirs += below
        level = below
    blocks = _debugfs(disk, [f"blocks {d}" for d in dirs])
    return {d: [int(b) for line in blocks[f"blocks {d}"] for b in line.split()] for d in dirs}


def _debugfs(disk: Path, commands: list[str]) -> dict[str, list[str]]:
    need(shutil.which("debugfs") is not None, "debugfs (e2fsprogs) is not installed")
    proc = subprocess.run(
        ["debugfs", "-f", "-", f"{disk}?offset={ROOT_START}"],
        input="\n".join(commands) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in proc.stdout.splitlines():
        if line.startswith("debugfs: "):
            current = out.setdefault(line[len("debugfs: ") :], [])
        elif current is not None:
            current.append(line)
    assert set(out) == set(commands), proc.stderr[-2000:]
    return out


@pytest.mark.parametrize("disk", [HintedFile, TellingFile])
def test_a_walk_hints_each_directory_s_blocks_once(faulty_disk: Path, disk: type[HintedFile]) -> None:
    """Walking /usr hints the data blocks of every directory below it, exactly the blocks debugfs
    lists, each directory once, whether or not the filesystem lists ahead of the walk: without
    that, a directory is hinted when the walk lists its parent (after yielding the directory
    itself); listing ahead, some are hinted before the walk gets to them."""
    _, block_size = _dumpe2fs_inode_tables(faulty_disk)
    want = _debugfs_directory_blocks(faulty_disk, "/usr")
    assert len(want) > 100
    stream = disk(faulty_disk)
    try:
        target = open_disk_target(stream, description="hinted")
        opened = len(stream.hints)
        seen: list[str] = []
        hinted_blocks: list[int] = []
        hinted_when: dict[int, int] = {}  # block -> directories the walk had yielded then
        for st in target.walk("/usr"):
            if st.kind is FileKind.DIR:
                seen.append(st.path)
                stream.clock = len(seen)
        for call, clock in zip(stream.hints[opened:], stream.clocks[opened:], strict=True):
            for offset, length in call:
                assert (offset - ROOT_START) % block_size == 0 and length % block_size == 0
                first = (offset - ROOT_START) // block_size
                hinted_blocks += range(first, first + length // block_size)
                hinted_when.update(dict.fromkeys(range(first, first + length // block_size), clock))
    finally:
        stream.close()
    assert sorted(seen) == sorted(want)
    expected_blocks = [b for blocks in want.values() for b in blocks]
    assert sorted(hinted_blocks) == sorted(expected_blocks)  # all of them, none twice
    early = [d for d, blocks in want.items() if hinted_when[blocks[0]] < seen.index(d) + 1]
    if disk is TellingFile:
        assert len(early) > len(want) // 4
    else:
        assert early == []


@pytest.mark.parametrize("disk", [HintedFile, TellingFile])
def test_hints_change_nothing_in_the_audit(faulty_disk: Path, disk: type[HintedFile]) -> None:
    """The same report (all but timings) from the image file with and without a stream taking hints
    (and listing ahead)."""
    packs, config = load_rules(None, [], builtin=True)

    def report(stream: Any) -> dict[str, Any]:
        try:
            data = audit(open_disk_target(stream, description="disk"), packs, config, RunSettings()).to_dict()
        finally:
            stream.close()
        data.pop("started_at"), data.pop("duration_s")
        for rule in data["rules"]:
            rule.pop("duration_ms")
        return data

    hinted = disk(faulty_disk)
    with_hints = report(hinted)
    assert len(hinted.hints) > 100
    assert report(faulty_disk.open("rb")) == with_hints
    assert with_hints["findings"]
