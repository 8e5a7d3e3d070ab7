"""Finding journal files in an image, a directory or a file, and accounting for each one."""

from __future__ import annotations

import os
import shutil

from imagelint.facts.journal import FileStatus, open_directory, open_image, open_path
from imagelint.targets.rootfs import RootfsTarget
from tests.facts.journal.compare import as_journalctl_json
from tests.facts.journal.conftest import journal_file, journalctl_json
from tests.facts.journal.exportgen import MACHINE_ID


def test_image_with_persistent_and_volatile_journals(journals, tmp_path):
    root = tmp_path / "root"
    persistent = root / "var/log/journal" / MACHINE_ID
    volatile = root / "run/log/journal" / MACHINE_ID
    persistent.mkdir(parents=True)
    volatile.mkdir(parents=True)
    shutil.copy(journal_file(journals["keyed"]), persistent / "system.journal")
    shutil.copy(journal_file(journals["legacy"]), root / "legacy.journal")
    # an absolute symlink resolves inside the image, never on the host
    os.symlink("/legacy.journal", volatile / "system.journal")
    os.mkfifo(volatile / "fifo.journal")  # a special file: refused, never opened
    (volatile / "notes.txt").write_text("not a journal name")

    with open_image(RootfsTarget(root)) as j:
        scan = j.scan
        n = sum(1 for _ in j.entries())
    by_name = {r.path: r for r in scan.files}
    assert set(by_name) == {
        f"/var/log/journal/{MACHINE_ID}/system.journal",
        f"/run/log/journal/{MACHINE_ID}/system.journal",
        f"/run/log/journal/{MACHINE_ID}/fifo.journal",
    }
    fifo = by_name[f"/run/log/journal/{MACHINE_ID}/fifo.journal"]
    assert fifo.status is FileStatus.SKIPPED and "FIFO" in (fifo.reason or "")
    assert scan.existing == ["/var/log/journal", "/run/log/journal"]
    # both files hold the same history from two writers: journalctl shows each entry once
    expected = journalctl_json(
        f"--file={journal_file(journals['keyed'])}", f"--file={journal_file(journals['legacy'])}"
    )
    assert n == len(expected) == scan.entries_examined
    assert not scan.complete  # the FIFO is present and unread


def test_image_without_journal(tmp_path):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    with open_image(RootfsTarget(root)) as j:
        assert list(j.entries()) == []
        assert j.scan.files_found == 0 and j.scan.existing == [] and not j.scan.complete
        assert j.scan.searched == ["/var/log/journal", "/run/log/journal"]


def test_directory_and_single_file_agree_with_journalctl(journals):
    d = journals["legacy"]
    f = journal_file(d)
    with open_directory(d) as j:
        from_dir = [as_journalctl_json(e) for e in j.entries()]
        assert j.scan.complete and j.scan.files_found == 1
    with open_path(f) as j:
        from_file = [as_journalctl_json(e) for e in j.entries()]
    assert from_dir == from_file == journalctl_json(f"--directory={d}")
