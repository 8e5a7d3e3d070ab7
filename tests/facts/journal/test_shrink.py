"""A journal file that shrinks while it is read: a gap (inconclusive), never a crash.

Journal files on a live host or in a mounted image can be truncated under the reader. A mapping of
such a file kills the process with SIGBUS at the first touch past the new end; imagelint reads with
``pread`` and takes the short read as the file having shrunk.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from imagelint.facts.journal import CorruptJournal, JournalFile, open_path
from imagelint.facts.journal.errors import FileShrank
from imagelint.facts.journal.follow import MAX_FAILURES, JournalFollower
from tests.facts.journal.conftest import journal_file
from tests.facts.journal.midread import MidRead
from tests.support import wait_for
from tests.watch.procs import IMAGELINT

SMALL = 4096  # what the file is cut to: its header still parses, every object is gone


@pytest.fixture
def copied(long_journal: Path, tmp_path: Path) -> Path:
    """A private copy of the long journal (the tests cut it)."""
    return Path(shutil.copytree(long_journal, tmp_path / "journal"))


def test_audit_of_a_journal_cut_while_read_is_inconclusive(copied: Path, tmp_path: Path) -> None:
    root = tmp_path / "image"
    root.mkdir()
    path = journal_file(copied)
    argv = [IMAGELINT, "audit", str(root), f"--journal={copied}", "--select", "pack:journal", "-f", "json"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        reading = MidRead(proc.pid, path)
        caught = wait_for(lambda: proc.poll() is None and reading(), timeout=60, every=0.001)
        if caught:
            os.truncate(path, SMALL)
        out, err = proc.communicate(timeout=120)
    assert caught, f"the audit was never seen reading the journal (exit {proc.returncode}): {err}"
    assert proc.returncode != -signal.SIGBUS, "killed by SIGBUS"
    assert proc.returncode == 3, (proc.returncode, err)
    assert "Traceback" not in err and len(err.splitlines()) <= 1, err
    assert "shrank" in out


def test_reading_a_cut_file_raises_file_shrank(copied: Path) -> None:
    path = journal_file(copied)
    jf = JournalFile.open(path)
    try:
        os.truncate(path, SMALL)
        with pytest.raises(FileShrank) as caught:
            for _ in jf.entries():
                pass
        assert isinstance(caught.value, CorruptJournal)  # a damaged read to every caller
    finally:
        jf.close()


def test_a_journal_cut_after_opening_is_read_in_part(copied: Path) -> None:
    path = journal_file(copied)
    with open_path(copied) as journal:
        os.truncate(path, SMALL)
        n = sum(1 for _ in journal.entries({"MESSAGE"}))
        (report,) = journal.scan.files
    assert n == 0
    assert report.status == "partial" and "shrank" in (report.reason or ""), report


def test_the_follower_keeps_its_place_in_a_cut_file_until_it_is_whole(copied: Path) -> None:
    """Cut between polls (as often as a file would be abandoned for damage), then restored in place:
    followed on from where it was, so every entry is handed over exactly once."""
    path = journal_file(copied)
    whole = path.read_bytes()
    follower = JournalFollower(str(copied), {"MESSAGE"}, from_start=True, max_entries=30_000)
    first = follower.poll()
    assert len(first) == 30_000 and not follower.stats.shrunk
    os.truncate(path, SMALL)
    for _ in range(MAX_FAILURES + 1):
        assert follower.poll() == []
        assert follower.stats.shrunk == {str(path): f"the file shrank from {len(whole)} to {SMALL} bytes"}
    with open(path, "r+b") as f:
        f.write(whole)
    rest = []
    while batch := follower.poll():
        rest += batch
    assert not follower.stats.shrunk and not follower.stats.abandoned
    cursors = [(e.realtime_usec, e.fields["MESSAGE"]) for e in first + rest]
    with open_path(copied) as journal:
        expected = [(e["__REALTIME_TIMESTAMP"], e["MESSAGE"]) for e in journal.entries({"MESSAGE"})]
    assert cursors == expected


def test_a_smaller_journal_under_a_reused_inode_is_a_new_file(
    copied: Path, journals: dict[str, Path]
) -> None:
    """Inode numbers are reused (journald vacuums a file, creates another): a smaller file with another
    file id under a known inode is new, read from its start, not a cut file."""
    path = journal_file(copied)
    other = journal_file(journals["keyed"]).read_bytes()
    follower = JournalFollower(str(copied), {"MESSAGE"}, from_start=True, max_entries=1_000_000)
    assert follower.poll()
    with open(path, "r+b") as f:  # the same inode, another journal in it
        f.truncate(0)
        f.write(other)
    new = follower.poll()
    assert not follower.stats.shrunk
    with open_path(journal_file(journals["keyed"])) as journal:
        assert len(new) == sum(1 for _ in journal.entries({"MESSAGE"}))
