"""Restarts the journal logged in a time window (soak attribution), against journalctl --since/--until."""

from __future__ import annotations

import collections
import shutil
from pathlib import Path

from imagelint.facts.journal.window import restarts_logged_between
from imagelint.targets import RootfsTarget
from tests.journal.conftest import journalctl_json
from tests.journal.exportgen import RESTART_ID


def test_restarts_in_a_window_equal_journalctl(journals: dict[str, Path], tmp_path: Path) -> None:
    directory = journals["keyed"]
    entries = journalctl_json("--directory", str(directory), f"MESSAGE_ID={RESTART_ID}")
    stamps = sorted(int(e["__REALTIME_TIMESTAMP"]) for e in entries)
    since, until = stamps[len(stamps) // 3], stamps[2 * len(stamps) // 3]  # a window inside the history
    oracle = collections.Counter(
        e["UNIT"]
        for e in journalctl_json(
            "--directory",
            str(directory),
            f"MESSAGE_ID={RESTART_ID}",
            f"--since=@{since / 1e6:.6f}",
            f"--until=@{until / 1e6:.6f}",
        )
    )
    image = tmp_path / "image"
    shutil.copytree(directory, image / "var/log/journal")
    counts, note = restarts_logged_between(RootfsTarget(image), since / 1e6, until / 1e6)
    assert counts == dict(oracle) and sum(counts.values()) > 10
    assert note.startswith("1 journal file(s) found, 1 read")


def test_no_journal_gives_none(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    assert restarts_logged_between(RootfsTarget(tmp_path), 0, 1) == (None, "no journal on this host")
