"""What the journal note says was examined: every entry an analysis decoded, by index or by scan, once."""

from __future__ import annotations

import itertools
import re
import shutil
from pathlib import Path

import pytest

from imagelint.config import Config
from imagelint.engine import RunSettings, audit
from imagelint.facts.journal import FileReport, JournalFile, analyze_restarts, count_signal, open_directory
from imagelint.facts.journal import reader as reader_mod
from imagelint.facts.journal.patterns import SIGNALS, SignalSpec
from imagelint.facts.journal.scan import JournalScan
from imagelint.report import Outcome
from imagelint.rulepacks import builtin_pack_paths, load_packs
from imagelint.targets import RootfsTarget
from tests.facts.journal.conftest import journalctl_json


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> set[tuple[str, int]]:
    """(file, offset) of every entry whose fields the reader decoded without error, however reached."""
    seen: set[tuple[str, int]] = set()
    fields_at, entry = reader_mod.JournalFile.fields_at, reader_mod.JournalFile.entry

    def spy_fields_at(self: JournalFile, off: int, fields: object) -> object:
        out = fields_at(self, off, fields)  # type: ignore[arg-type]
        seen.add((self.name, off))
        return out

    def spy_entry(self: JournalFile, off: int, fields: object = None) -> object:
        out = entry(self, off, fields)  # type: ignore[arg-type]
        seen.add((self.name, off))
        return out

    monkeypatch.setattr(reader_mod.JournalFile, "fields_at", spy_fields_at)
    monkeypatch.setattr(reader_mod.JournalFile, "entry", spy_entry)
    return seen


def _note_counts(note: str) -> tuple[int, int, int]:
    m = re.search(r"([\d,]+) entries examined \(([\d,]+) by index, ([\d,]+) by scan\)", note)
    assert m, note
    total, by_index, by_scan = (int(g.replace(",", "")) for g in m.groups())
    return total, by_index, by_scan


def test_restart_analysis_through_the_index_is_counted(journals, decoded) -> None:
    with open_directory(journals["keyed"]) as j:
        report = analyze_restarts(j)
        note = j.scan.note()
        size = j.scan.files[0].size
    assert report.units and decoded
    total, by_index, by_scan = _note_counts(note)
    assert total == by_index == len(decoded) > 0 and by_scan == 0
    assert note.startswith(f"1 journal file read ({size / 2**20:.1f} MiB), {total:,} entries examined")
    assert note.endswith("problems: 0")
    # far fewer than the journal holds: found through the index, not read in full
    assert total < len(journalctl_json("--directory", str(journals["keyed"]))) / 3


def test_index_and_scan_together_count_each_entry_once(journals, decoded) -> None:
    with open_directory(journals["keyed"]) as j:
        analyze_restarts(j)
        by_index = set(decoded)
        first = list(itertools.islice(j.entries(), 500))  # a scan that stops part way
        (jf,) = j.files
        scanned = {(jf.name, off) for off in itertools.islice(jf.entry_offsets(), 500)}
        scan, note = j.scan, j.scan.note()
    assert len(first) == 500 and by_index & scanned  # some entries were reached both ways
    assert decoded == by_index | scanned
    total, idx, by_scan = _note_counts(note)
    assert (total, idx, by_scan) == (len(by_index | scanned), len(by_index - scanned), 500)
    assert (scan.entries_examined, scan.entries_by_index, scan.entries_by_scan) == (total, idx, by_scan)


def test_a_full_scan_counts_every_entry_once(journals, decoded) -> None:
    everything = SignalSpec("anything", {}, None)  # no field match: the counter reads every entry
    with open_directory(journals["keyed"]) as j:
        analyze_restarts(j)
        for spec in SIGNALS.values():  # through the index
            count_signal(j, spec)
        result = count_signal(j, everything)
        total, idx, by_scan = _note_counts(j.scan.note())
    n = len(journalctl_json("--directory", str(journals["keyed"])))
    assert result.total == n
    assert total == by_scan == n == len(decoded) and idx == 0


def test_merged_files_are_counted_per_file(two_writers, decoded) -> None:
    with open_directory(two_writers) as j:
        analyze_restarts(j)
        scan = j.scan
        note = scan.note()
    assert note.startswith("2 journal files read (")
    per_file = {f.path: f.entries_examined for f in scan.files}
    assert all(per_file.values())
    assert sum(per_file.values()) == _note_counts(note)[0] == len(decoded)
    for f in scan.files:
        assert f.entries_examined == sum(1 for name, _off in decoded if name == f.path)


def test_a_file_read_in_part_and_one_skipped_are_said(journals, tmp_path: Path) -> None:
    (src,) = sorted(Path(journals["keyed"]).rglob("*.journal"))
    d = tmp_path / "j"
    d.mkdir()
    shutil.copy(src, d / "system.journal")
    data = src.read_bytes()
    (d / "cut.journal").write_bytes(data[: len(data) * 2 // 3])
    (d / "empty.journal").write_bytes(b"")
    with open_directory(d) as j:
        analyze_restarts(j)
        note = j.scan.note()
    assert re.match(
        r"2 journal files read \([\d.]+ MiB\), 1 of them in part, 1 skipped, [\d,]+ entries", note
    )
    assert not note.endswith("problems: 0")


def test_no_files_says_where_it_looked(tmp_path: Path) -> None:
    scan = JournalScan(source="x", searched=["/var/log/journal", "/run/log/journal"])
    assert scan.note() == "no journal files found in /var/log/journal, /run/log/journal"


def test_examined_bookkeeping() -> None:
    r = FileReport("f")
    r.examined(4096, by_scan=False)
    r.examined(4096, by_scan=False)  # decoded again by another analysis: still one entry
    r.examined(8192, by_scan=False)
    assert (r.entries_examined, r.entries_by_index, r.entries_by_scan) == (2, 2, 0)
    r.examined(4096, by_scan=True)  # then scanned: it moves from index to scan
    r.examined(1 << 30, by_scan=True)  # far into a large file
    assert (r.entries_examined, r.entries_by_index, r.entries_by_scan) == (3, 1, 2)
    r.examined(1 << 30, by_scan=False)  # already scanned: nothing changes
    r.examined(4104, by_scan=True)  # the next 8-byte slot is another entry
    assert (r.entries_examined, r.entries_by_index, r.entries_by_scan) == (4, 1, 3)
    assert r.to_dict()["entries_by_index"] == 1 and r.to_dict()["entries_by_scan"] == 3


def test_the_run_note_counts_what_the_restart_rule_decoded(journals, decoded, tmp_path: Path) -> None:
    image = tmp_path / "image"
    shutil.copytree(journals["keyed"], image / "var/log/journal")
    packs = load_packs([], builtin=builtin_pack_paths())
    report = audit(RootfsTarget(image), packs, Config(select=["IL301"]), RunSettings())
    assert {r.rule_id: r.outcome for r in report.rules}["IL301"] is Outcome.FAIL
    (note,) = [n for n in report.notes if n.startswith("journal: ")]
    total, by_index, by_scan = _note_counts(note)
    assert total == by_index == len(decoded) > 0 and by_scan == 0
    assert note.startswith("journal: 1 journal file read (") and note.endswith("problems: 0")
    assert report.facts["journal"]["entries_examined"] == total
