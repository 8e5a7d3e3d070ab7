"""`imagelint watch` following a journal file that is cut under it: the journal source goes down, the
watch keeps running, and when the file is whole again the source comes back and every entry is
counted exactly once."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from imagelint.facts.journal import JournalFile
from tests.facts.journal.conftest import journal_file, long_journal  # noqa: F401 (a fixture)
from tests.facts.journal.midread import MidRead
from tests.support import wait_for as wait_until
from tests.watch.procs import IMAGELINT, process, wait_for
from tests.watch.test_bad_input import up, values

SMALL = 4096


def test_a_journal_cut_while_followed_is_a_source_down_until_it_is_whole(
    long_journal: Path,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    journal = Path(shutil.copytree(long_journal, tmp_path / "journal"))
    path = journal_file(journal)
    whole = path.read_bytes()
    jf = JournalFile.open(path)
    n_entries = jf.header.n_entries
    jf.close()
    out = tmp_path / "out"
    out.mkdir()
    no_cgroups = tmp_path / "no-cgroups"
    no_cgroups.mkdir()
    argv = [IMAGELINT, "watch", f"--textfile={out}", f"--cgroup-root={no_cgroups}",
            f"--journal-dir={journal}", "--journal-from-start", "--journal-every=1s", "--interval=1s",
            "--no-rules"]  # fmt: skip
    log = tmp_path / "watch.log"

    def metrics(proc: subprocess.Popen[bytes]) -> dict:
        if proc.poll() is not None:
            raise AssertionError(f"the watch died (exit {proc.returncode}): {log.read_text()}")
        return values((out / "imagelint.prom").read_text())

    with process(argv, log) as proc:
        reading = MidRead(proc.pid, path)
        assert wait_until(lambda: proc.poll() is None and reading(), timeout=60, every=0.001), log.read_text()
        os.truncate(path, SMALL)
        wait_for("the journal source down", lambda: up(metrics(proc), "journal") == 0.0)
        with open(path, "r+b") as f:  # whole again, the same file
            f.write(whole)
        wait_for(
            "every entry counted once, the source up",
            lambda: (
                (m := metrics(proc))
                and up(m, "journal") == 1.0
                and m[("imagelint_journal_entries_total", ())] == n_entries
            ),
        )
        assert proc.poll() is None
    assert proc.returncode != -signal.SIGBUS
    text = log.read_text()
    assert "Traceback" not in text
    assert "imagelint: warning: watch: journal: " in text and "shrank" in text, text
    assert "imagelint: warning: watch: journal: available again" in text, text
