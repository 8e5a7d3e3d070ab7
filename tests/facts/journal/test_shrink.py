"""A journal file that shrinks while it is read: a gap (inconclusive), never a crash.

Journal files on a live host or in a mounted image can be truncated under the reader. A mapping of
such a file kills the process with SIGBUS at the first touch past the new end; imagelint reads with
``pread`` and takes the short read as the file having shrunk.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from imagelint.facts.journal import CorruptJournal, JournalFile, open_path
from imagelint.facts.journal.errors import FileShrank
from tests.facts.journal.conftest import journal_file
from tests.facts.journal.midread import MidRead
from tests.support import os_root, wait_for
from tests.watch.procs import IMAGELINT

SMALL = 4096  # what the file is cut to: its header still parses, every object is gone


def test_audit_of_a_journal_cut_while_read_is_inconclusive(copied: Path, tmp_path: Path) -> None:
    root = os_root(tmp_path / "image")
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
