"""Damaged and unsupported journal files: a stated skip or partial read, never a crash or a silent pass."""

from __future__ import annotations

import os
import random
import shutil
import struct
from pathlib import Path

import pytest

from imagelint.facts.journal import FileStatus, analyze_restarts, open_directory
from tests.facts.journal.compare import as_journalctl_json
from tests.facts.journal.conftest import journal_file, journalctl_json
from tests.facts.journal.exportgen import MACHINE_ID

HEADER_TAIL_OBJECT = 136  # tail_object_offset in the header


def _copy(journals, tmp_path: Path, layout: str = "keyed") -> tuple[Path, Path]:
    d = tmp_path / "j"
    (d / MACHINE_ID).mkdir(parents=True)
    src = journal_file(journals[layout])
    f = d / MACHINE_ID / "system.journal"
    shutil.copy(src, f)
    return d, f


def _used_end(f: Path) -> int:
    with open(f, "rb") as fh:
        fh.seek(HEADER_TAIL_OBJECT)
        return struct.unpack("<Q", fh.read(8))[0]


def _read_everything(d: Path):
    with open_directory(d) as j:
        entries = list(j.entries())
        report = analyze_restarts(j)
        return entries, j.scan, report


def test_zero_length_file_is_skipped(journals, tmp_path):
    d, f = _copy(journals, tmp_path)
    (f.parent / "user-1000.journal").write_bytes(b"")
    entries, scan, _ = _read_everything(d)
    (empty,) = [r for r in scan.files if r.path.endswith("user-1000.journal")]
    assert empty.status is FileStatus.SKIPPED and empty.reason == "zero-length file"
    assert not scan.complete and scan.unreadable == [empty]
    assert [as_journalctl_json(e) for e in entries] == journalctl_json(f"--file={f}")


def test_unknown_incompatible_flag_is_unsupported(journals, tmp_path):
    d, f = _copy(journals, tmp_path)
    with open(f, "r+b") as fh:
        fh.seek(12)
        flags = struct.unpack("<I", fh.read(4))[0]
        fh.seek(12)
        fh.write(struct.pack("<I", flags | 1 << 9))
    # journalctl refuses it too
    assert journalctl_json(f"--file={f}") == []
    entries, scan, report = _read_everything(d)
    (r,) = scan.files
    assert r.status is FileStatus.SKIPPED and r.reason is not None and r.reason.startswith("unsupported")
    assert "0x200" in r.reason
    assert entries == [] and report.units == [] and not scan.complete


def test_not_a_journal_is_skipped(tmp_path):
    d = tmp_path / "j"
    d.mkdir()
    (d / "system.journal").write_bytes(os.urandom(4096))
    entries, scan, _ = _read_everything(d)
    (r,) = scan.files
    assert r.status is FileStatus.SKIPPED and "signature" in (r.reason or "")
    assert entries == []


@pytest.mark.parametrize("layout", ["keyed", "legacy"])
@pytest.mark.parametrize("fraction", [0.02, 0.3, 0.6, 0.9])
def test_truncated_file_is_partial_and_reads_a_prefix(journals, tmp_path, layout, fraction):
    d, f = _copy(journals, tmp_path, layout)
    full = journalctl_json(f"--file={f}")
    with open(f, "r+b") as fh:
        fh.truncate(int(_used_end(f) * fraction))
    entries, scan, _ = _read_everything(d)
    (r,) = scan.files
    assert r.reason is not None and r.reason.startswith("truncated"), r.reason
    mine = [as_journalctl_json(e) for e in entries]
    # cut inside the hash tables nothing is usable; later cuts keep what lies before the cut
    assert r.status is (FileStatus.PARTIAL if mine else FileStatus.SKIPPED)
    assert not scan.complete and len(mine) < len(full)
    assert mine == full[: len(mine)], "what is read of a truncated file is exactly its beginning"


@pytest.mark.parametrize("seed", range(6))
def test_random_bytes_in_the_middle(journals, tmp_path, seed):
    d, f = _copy(journals, tmp_path, "keyed" if seed % 2 else "legacy")
    full = journalctl_json(f"--file={f}")
    rng = random.Random(seed)
    end = _used_end(f)
    with open(f, "rb") as fh:
        dht_offset, dht_size = struct.unpack("<QQ", fh.read(120)[104:120])
    # objects start after the hash tables (journal-remote sizes the data table for a large file, so
    # noise "in the middle of the file" would otherwise land in empty buckets no scan ever reads)
    first = dht_offset + dht_size
    start = rng.randrange(first + (end - first) // 3, first + 2 * (end - first) // 3)
    with open(f, "r+b") as fh:
        fh.seek(start)
        fh.write(rng.randbytes(4096))
    entries, scan, _report = _read_everything(d)
    (r,) = scan.files
    if r.status is FileStatus.READ:
        # the noise hit only bytes a scan does not check (payloads, unused slots, index links):
        # then we must show exactly what the reference reader shows for the damaged file
        assert [as_journalctl_json(e) for e in entries] == journalctl_json(f"--file={f}")
        return
    assert r.status is FileStatus.PARTIAL and r.reason and r.problems >= 1
    assert not scan.complete
    # what was read is genuine: entries are ones journalctl had before the damage (a field value
    # inside the noise itself may differ: payloads carry no checksum the reader could verify)
    original = {e["__CURSOR"]: e for e in full}
    mine = [as_journalctl_json(e) for e in entries]
    assert len(mine) < len(full)
    assert all(e["__CURSOR"] in original for e in mine)
    assert sum(1 for e in mine if original[e["__CURSOR"]] == e) >= len(mine) - 64


def test_dirty_online_tilde_file_is_read_and_flagged(journals, tmp_path):
    d, f = _copy(journals, tmp_path)
    dirty = f.parent / "system@0001-0002.journal~"
    shutil.copy(f, dirty)
    f.unlink()
    with open(dirty, "r+b") as fh:
        fh.seek(16)
        fh.write(b"\x01")  # STATE_ONLINE: the writer had it open
    with open_directory(d) as j:
        entries = [as_journalctl_json(e) for e in j.entries()]
        (r,) = j.scan.files
    assert r.state == "online" and r.dirty and r.status is FileStatus.READ
    assert entries == journalctl_json(f"--directory={d}")


def test_loop_in_entry_array_chain_is_detected(journals, tmp_path):
    d, f = _copy(journals, tmp_path)
    data = bytearray(f.read_bytes())
    first_array = struct.unpack_from("<Q", data, 176)[0]
    # point the first entry array's "next" back at itself
    struct.pack_into("<Q", data, first_array + 16, first_array)
    f.write_bytes(bytes(data))
    entries, scan, _ = _read_everything(d)
    (r,) = scan.files
    assert r.status is FileStatus.PARTIAL and "loop" in (r.reason or "")
    assert len(entries) > 0
