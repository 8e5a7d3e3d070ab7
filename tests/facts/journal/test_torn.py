"""Torn journal files (a snapshot of a running system): inconclusive, never a silent pass.

The files are real (written by systemd-journal-remote), then torn as a crash or an image snapshot
taken mid-write leaves them: the header says *online* and the last entries are zeroed, unlinked, or
point at offsets where nothing was written. ``journalctl --verify`` fails on each. The journal rules
look entries up through the index, which never visits those entries, so before the structure check
such a file read as complete and an audit passed.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from imagelint.facts.journal import FileStatus, analyze_restarts, count_signal, open_directory
from imagelint.facts.journal.patterns import SIGNALS
from tests.facts.journal.conftest import JOURNALCTL, have_tools, journalctl_json
from tests.facts.journal.craft import OBJECT_ENTRY, STATE_ONLINE, JournalBytes
from tests.facts.journal.exportgen import MACHINE_ID, Host, kubelet_line, write_journal
from tests.facts.journal.test_journal_rules import JOURNAL_RULES
from tests.support import os_root, run_cli

DAMAGES = ["zeroed-entries", "unlinked-entries", "offsets-past-the-end", "offsets-into-data"]


@pytest.fixture(scope="module")
def healthy_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An image whose journal holds one kernel line and kubelet noise: every journal rule passes."""
    have_tools()
    host = Host(21)
    host.new_boot(1_735_000_000_000_000)
    export = host.kernel("Linux version 6.1.0-28-cloud-amd64", priority="5")
    export += b"".join(kubelet_line(host, i) for i in range(300))
    root = os_root(tmp_path_factory.mktemp("torn") / "image")
    write_journal(export, root / "var/log/journal")
    return root


def tear(journal: Path, damage: str, n: int = 3) -> None:
    """Mark the file online and damage its last ``n`` entries as a torn write would."""
    jb = JournalBytes(journal.read_bytes())
    jb.set("state", STATE_ONLINE)
    items = jb.entry_array_items()
    last = items[-n:]
    width = 4 if jb.compact else 8
    fmt = "<I" if jb.compact else "<Q"
    if damage == "zeroed-entries":  # the entry objects never reached the disk
        for _pos, entry in last:
            obj = jb.object_at(entry)
            assert obj.type == OBJECT_ENTRY
            jb.data[entry : entry + obj.size] = bytes(obj.size)
    elif damage == "unlinked-entries":  # the array items were never written; the header counts them
        for pos, _entry in last:
            jb.data[pos : pos + width] = bytes(width)
    elif damage == "offsets-past-the-end":  # the items point where the file has no objects
        end = len(jb.data)
        for k, (pos, _entry) in enumerate(last):
            struct.pack_into(fmt, jb.data, pos, end + 8 * k)
    else:  # "offsets-into-data": ascending, aligned, inside the arena, but not at an entry
        for k, (pos, entry) in enumerate(last):
            struct.pack_into(fmt, jb.data, pos, entry + 8 + 8 * k)
    journal.write_bytes(bytes(jb))


def verify(journal: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [JOURNALCTL or "journalctl", "--verify", f"--file={journal}"], capture_output=True, text=True
    )


def _copy(image: Path, tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "image"
    shutil.copytree(image, root, symlinks=True)
    (journal,) = (root / "var/log/journal" / MACHINE_ID).glob("*.journal")
    return root, journal


def _audit(root: Path) -> tuple[int, dict]:
    import json

    proc = run_cli("audit", str(root), "--select", "pack:journal", "-f", "json")
    assert "Traceback" not in proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_the_healthy_journal_passes(healthy_image: Path, tmp_path: Path) -> None:
    root, journal = _copy(healthy_image, tmp_path)
    assert verify(journal).returncode == 0
    code, report = _audit(root)
    assert code == 0 and report["verdict"] == "pass"
    # online but intact (a clean snapshot of a running system) is still a pass
    jb = JournalBytes(journal.read_bytes())
    jb.set("state", STATE_ONLINE)
    journal.write_bytes(bytes(jb))
    code, report = _audit(root)
    assert code == 0, report["errors"]
    assert report["facts"]["journal"]["files"][0]["status"] == "read"


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_torn_journal_is_inconclusive(healthy_image: Path, tmp_path: Path, damage: str) -> None:
    root, journal = _copy(healthy_image, tmp_path)
    tear(journal, damage)
    checked = verify(journal)
    assert checked.returncode != 0 and "FAIL" in checked.stderr + checked.stdout, checked
    code, report = _audit(root)
    assert code == 3 and report["verdict"] == "inconclusive", (code, report["errors"])
    outcomes = {r["rule_id"]: r["outcome"] for r in report["rules"] if r["rule_id"] in JOURNAL_RULES}
    assert outcomes == dict.fromkeys(JOURNAL_RULES, "error")
    rel = str(journal.relative_to(root))
    assert any(rel in (e["where"] or "") and "torn or damaged" in e["message"] for e in report["errors"])
    (file_report,) = report["facts"]["journal"]["files"]
    assert file_report["status"] == "partial" and file_report["state"] == "online"


@pytest.mark.parametrize("damage", DAMAGES)
def test_every_reading_path_marks_the_torn_file_partial(
    healthy_image: Path, tmp_path: Path, damage: str
) -> None:
    _root, journal = _copy(healthy_image, tmp_path)
    tear(journal, damage)
    d = journal.parent.parent
    for read in (
        lambda j: analyze_restarts(j),
        lambda j: count_signal(j, SIGNALS["ena-reset"]),
        lambda j: list(j.match({"_TRANSPORT": "kernel"})),
        lambda j: list(j.entries()),
    ):
        with open_directory(d) as j:
            read(j)
            (r,) = j.scan.files
            assert r.status is FileStatus.PARTIAL and r.reason and r.reason.startswith("torn or damaged")
    # what is intact is still read, exactly as journalctl reads it
    with open_directory(d) as j:
        kernel = list(j.match({"_TRANSPORT": "kernel"}, fields={"MESSAGE"}))
    assert [e["MESSAGE"] for e in kernel] == [
        e["MESSAGE"] for e in journalctl_json(f"--file={journal}", "_TRANSPORT=kernel")
    ]


def test_header_counting_more_entries_than_linked(healthy_image: Path, tmp_path: Path) -> None:
    """A closed file whose header claims more entries than its arrays hold (no zeroed item at all)."""
    _root, journal = _copy(healthy_image, tmp_path)
    jb = JournalBytes(journal.read_bytes())
    jb.set("n_entries", jb.get("n_entries") + 5)
    journal.write_bytes(bytes(jb))
    assert verify(journal).returncode != 0
    with open_directory(journal.parent.parent) as j:
        analyze_restarts(j)
        (r,) = j.scan.files
    assert r.status is FileStatus.PARTIAL and "counts" in (r.reason or "")


def test_tail_object_outside_the_file(healthy_image: Path, tmp_path: Path) -> None:
    _root, journal = _copy(healthy_image, tmp_path)
    jb = JournalBytes(journal.read_bytes())
    jb.set("state", STATE_ONLINE)
    jb.set("tail_object_offset", len(jb.data) + 4096)
    journal.write_bytes(bytes(jb))
    assert verify(journal).returncode != 0
    with open_directory(journal.parent.parent) as j:
        count_signal(j, SIGNALS["ena-reset"])
        (r,) = j.scan.files
    assert r.status is FileStatus.PARTIAL and "tail object" in (r.reason or "")
