"""The live journal follower: every entry exactly once while systemd-journal-remote writes, across a rotation.

The writer is the real ``systemd-journal-remote`` fed export format on a pipe that stays open, so the
file is online (being written) while it is followed. The rotation is journald's: the active
``system.journal`` is renamed to ``system@<seqnum id>-<head seqnum>-<head realtime>.journal`` after
its writer closed it, and a new writer starts a new ``system.journal``; entries the old file got
after the last poll must still be read from it under its new name. journalctl is the oracle for
when the writer's entries have landed.

A file cut under the follower (truncated between polls, or an inode reused by another journal) keeps
its place until it is whole again, or is read as the new file it is.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from imagelint.facts.journal import open_path
from imagelint.probes.journal import MAX_FAILURES, JournalFollower, JournalUnavailable
from tests.facts.journal.conftest import have_tools, journal_file, journalctl_json
from tests.facts.journal.exportgen import JOURNAL_REMOTE, MACHINE_ID, Host

FIELDS = ("MESSAGE", "_TRANSPORT")


class Writer:
    """A running systemd-journal-remote appending to ``path`` whatever export format it is sent."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.proc = subprocess.Popen(
            [JOURNAL_REMOTE, f"--output={path}", "--split-mode=none", "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.sent = 0

    def send(self, chunk: bytes, n: int) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(chunk)
        self.proc.stdin.flush()
        self.sent += n
        deadline = time.monotonic() + 30
        while len(journalctl_json("--file", str(self.path), all_fields=False)) < self.sent:
            assert self.proc.poll() is None, self.proc.stderr.read() if self.proc.stderr else ""
            assert time.monotonic() < deadline, f"journal-remote did not write {self.sent} entries in 30 s"
            time.sleep(0.05)

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def writers():
    have_tools()
    started: list[Writer] = []

    def start(path: Path) -> Writer:
        w = Writer(path)
        started.append(w)
        return w

    yield start
    for w in started:
        w.close()


def kernel_lines(host: Host, first: int, n: int) -> bytes:
    out = b""
    for i in range(first, first + n):
        host.at(host.mono + 1_000_000)
        out += host.kernel(f"ena 0000:00:05.0 eth0: Trigger reset is on (entry {i})")
    return out


def ids(entries) -> list[int]:
    return [int(str(e.fields["MESSAGE"]).rsplit(" ", 1)[1].rstrip(")")) for e in entries]


def test_follow_counts_each_entry_once_across_rotation(tmp_path, writers):
    host = Host(7)
    host.new_boot(1_700_000_000_000_000)
    d = tmp_path / "journal"
    (d / MACHINE_ID).mkdir(parents=True)
    active = d / MACHINE_ID / "system.journal"

    a = writers(active)
    a.send(kernel_lines(host, 0, 5), 5)
    follower = JournalFollower(str(d), FIELDS)
    assert follower.poll() == []  # what was there before watching is not counted

    a.send(kernel_lines(host, 5, 20), 20)
    got = follower.poll()
    assert ids(got) == list(range(5, 25))
    assert all(e.fields["_TRANSPORT"] == "kernel" for e in got)
    assert follower.poll() == []

    # appended after the last poll, then the file is rotated away before the next one
    a.send(kernel_lines(host, 25, 7), 7)
    a.close()
    head = journalctl_json("--file", str(active), all_fields=False)[0]
    cursor = dict(part.split("=", 1) for part in str(head["__CURSOR"]).split(";"))
    name = f"system@{cursor['s']}-{int(cursor['i'], 16):016x}-{int(cursor['t'], 16):016x}.journal"
    archived = d / MACHINE_ID / name
    os.rename(active, archived)
    b = writers(active)
    b.send(kernel_lines(host, 32, 13), 13)
    got = follower.poll()
    assert sorted(ids(got)) == list(range(25, 45))
    assert {e.path for e in got} == {str(archived), str(active)}

    b.send(kernel_lines(host, 45, 5), 5)
    assert ids(follower.poll()) == list(range(45, 50))
    b.close()  # the header changes (state offline), the entries do not
    assert follower.poll() == []
    assert follower.stats.entries == 45
    assert follower.stats.bad_entries == follower.stats.walk_failures == 0

    everything = JournalFollower(str(d), FIELDS, from_start=True).poll()
    assert sorted(ids(everything)) == list(range(50))


def test_follow_reads_a_copy_once_and_a_new_file_whole(tmp_path, writers):
    host = Host(8)
    host.new_boot(1_700_000_000_000_000)
    d = tmp_path / "journal"
    (d / MACHINE_ID).mkdir(parents=True)
    follower = JournalFollower(str(d), FIELDS)
    assert follower.poll() == []
    first = writers(d / MACHINE_ID / "system.journal")
    first.send(kernel_lines(host, 0, 4), 4)
    first.close()
    os.link(d / MACHINE_ID / "system.journal", d / "hardlink.journal")
    assert ids(follower.poll()) == [0, 1, 2, 3]  # a file born after the start is read from its start
    assert follower.poll() == []


def test_follow_an_unreadable_directory_is_unavailable(tmp_path):
    with pytest.raises(JournalUnavailable, match="No such file"):
        JournalFollower(str(tmp_path / "absent"), FIELDS).poll()
    (tmp_path / "file").write_text("x")
    with pytest.raises(JournalUnavailable, match="not a directory"):
        JournalFollower(str(tmp_path / "file"), FIELDS).poll()


SMALL = 4096  # what a cut file is cut to: its header still parses, every object is gone


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
