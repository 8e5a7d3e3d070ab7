"""Journals inside disk images: read by positioned reads through a bounded page cache (no mmap).

Real journals (systemd-journal-remote) are put in ext4 images made by mke2fs -d. Read from the image
they give the same entries as the mmap path reads from the directory, and the decompression bombs
stay a problem on their entry, within the same 150 MiB peak RSS, on this path too.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from imagelint.facts.journal import open_directory, open_image
from imagelint.facts.journal.paged import PagedBuffer
from imagelint.targets.disk import open_disk_file
from tests.facts.journal.bombs import bomb_journal, normal_journal, peak_rss
from tests.facts.journal.conftest import have_tools
from tests.facts.journal.exportgen import scenario, write_journal
from tests.treerss import MAX_RSS_MIB

MIB = 1024 * 1024


def _image_with_journal(journal_dir: Path, tmp_path: Path, size: str = "64M") -> Path:
    """An ext4 image whose /var/log/journal is ``journal_dir`` (MACHINE_ID/*.journal inside it)."""
    tree = tmp_path / "tree"
    (tree / "etc").mkdir(parents=True)
    (tree / "usr").mkdir()
    (tree / "etc/os-release").write_text("ID=debian\n")
    (tree / "var/log").mkdir(parents=True)
    subprocess.run(["cp", "-a", str(journal_dir), str(tree / "var/log/journal")], check=True)
    image = tmp_path / "journal.ext4"
    subprocess.run(
        ["mke2fs", "-q", "-t", "ext4", "-d", str(tree), str(image), size], check=True, capture_output=True
    )
    return image


@pytest.mark.parametrize("layout", ["keyed", "legacy", "plain"])
def test_the_stream_path_reads_what_the_mmap_path_reads(tmp_path: Path, layout: str):
    """The layouts journal-remote 252 writes (keyed hash + zstd + compact; legacy; uncompressed)."""
    have_tools()
    journal = write_journal(
        scenario(seed=11), tmp_path / "journal", legacy=layout == "legacy", compress=layout != "plain"
    )
    image = _image_with_journal(journal, tmp_path)
    with open_directory(journal) as mapped:
        expected = list(mapped.entries())
    with open_image(open_disk_file(image)) as streamed:
        ((_report, jf),) = streamed._files
        assert isinstance(jf._buf, PagedBuffer)  # really the stream path, not a mapping
        got = list(streamed.entries())
    assert got == expected and len(got) > 100


@pytest.mark.parametrize(("kind", "size"), [("zstd", 1536 * MIB), ("lz4", 1536 * MIB), ("xz", 60 * MIB)])
def test_a_bomb_in_a_disk_image_stays_under_the_memory_bound(tmp_path: Path, kind: str, size: int) -> None:
    have_tools()
    image = _image_with_journal(bomb_journal(kind, tmp_path / "journal", size), tmp_path)
    result = peak_rss(image, disk_image=True)
    assert result["peak_mib"] <= MAX_RSS_MIB, result  # type: ignore[operator]
    ((status, reason),) = result["files"]  # type: ignore[misc]
    assert status == "partial", result
    assert "limit" in reason or "cannot decompress" in reason, reason
    assert result["entries"] == 200


def test_an_unbombed_journal_in_a_disk_image_reads_in_full(tmp_path: Path) -> None:
    have_tools()
    normal_journal(tmp_path / "journal")
    image = _image_with_journal(tmp_path / "journal", tmp_path)
    result = peak_rss(image, disk_image=True)
    assert result["files"] == [["read", None]] and result["entries"] == 201 and result["signals"] == 1
