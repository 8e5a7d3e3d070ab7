"""The contract the EBS snapshot reader plugs into: ``open_disk_target`` on any seekable raw-disk
stream, ``--partition`` by number, and a stream's ``stats()`` counters in the report's facts."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from imagelint.engine import RunSettings, audit
from imagelint.session import load_rules
from imagelint.targets.disk import open_disk_target
from imagelint.targets.disk.errors import DiskImageError
from tests.targets.disk import images


class CountingStream(io.RawIOBase):
    """A read-only view of a raw disk file that counts what is read (as the EBS reader counts blocks)."""

    def __init__(self, path: Path) -> None:
        self._f = open(path, "rb")  # noqa: SIM115
        self.size = path.stat().st_size
        self.reads = 0
        self.bytes = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        self.reads += 1
        self.bytes += len(data)
        return data

    def stats(self) -> dict[str, int]:
        return {"reads": self.reads, "bytes_read": self.bytes}


@pytest.fixture(scope="module")
def gpt_raw(debian_rootfs: Path) -> Path:
    return images.cached("gpt-ext4.raw", lambda out: images.gpt(images.ext4_fs(debian_rootfs), out))


def test_a_stream_audits_and_reports_what_was_opened_and_read(gpt_raw: Path) -> None:
    stream = CountingStream(gpt_raw)
    target = open_disk_target(stream, description="snap-0123", kind="ebs")
    packs, config = load_rules(None, [], builtin=True)
    report = audit(target, packs, config, RunSettings())
    assert report.target == {"kind": "ebs", "path": "snap-0123"}
    disk = report.facts["disk"]
    assert disk["partition_table"] == "gpt" and disk["container"] == "raw"
    assert disk["root"] == {"volume": "partition 2", "partition": 2, "filesystem": "ext4"}
    assert {"volume": "partition 1", "content": "vfat"} in disk["volumes"]
    # read when the report is made: the counters cover the whole audit, a small part of the disk
    assert disk["io"]["bytes_read"] == stream.bytes and 0 < stream.bytes < gpt_raw.stat().st_size // 4
    assert any(f.rule_id == "IL101" for f in report.findings)


def test_partition_by_number(gpt_raw: Path) -> None:
    target = open_disk_target(CountingStream(gpt_raw), description="d", partition=2)
    assert target.facts()["disk"]["root"]["partition"] == 2  # type: ignore[index]
    with pytest.raises(DiskImageError, match=r"unsupported or unrecognised filesystem \(partition 1: vfat\)"):
        open_disk_target(CountingStream(gpt_raw), description="d", partition=1)  # the EFI partition
