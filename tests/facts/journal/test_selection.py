"""Decoding some fields only (``selection``): the same values as a full decode, and no more DATA objects
read than needed."""

from __future__ import annotations

import random
import shutil

import pytest

from imagelint.facts.journal import JournalFile, analyze_restarts, open_directory, selection
from imagelint.facts.journal.restarts import _FIELDS
from tests.facts.journal.conftest import have_tools, journal_file
from tests.facts.journal.exportgen import Host, write_journal

FIELD_SETS = [
    frozenset({"MESSAGE"}),
    frozenset({"UNIT", "MESSAGE_ID", "N_RESTARTS"}),
    frozenset({"TAG", "BINARY", "HUGE_TEXT", "BIG_TEXT"}),  # repeated, binary, large, compressed
    frozenset({"NO_SUCH_FIELD"}),
    _FIELDS,
]


def _filtered(entry: dict[str, object], fields: frozenset[str]) -> dict[str, object]:
    return {k: v for k, v in entry.items() if k in fields or k.startswith("__") or k == "_BOOT_ID"}


@pytest.mark.parametrize("layout", ["keyed", "legacy", "plain"])
@pytest.mark.parametrize("online", [False, True], ids=["closed-file", "online-file"])
def test_some_fields_equal_the_full_decode(journals, tmp_path, layout, online):
    src = journal_file(journals[layout])
    f = tmp_path / "system.journal"
    shutil.copy(src, f)
    if online:  # a file still being written: its FIELD lists are not trusted, every item is probed
        with open(f, "r+b") as fh:
            fh.seek(16)
            fh.write(b"\x01")
    full = JournalFile.open(f)
    offsets = list(full.entry_offsets())
    everything = [full.entry(off) for off in offsets]
    for fields in FIELD_SETS:
        jf = JournalFile.open(f)
        for _ in range(2):  # the second pass runs with everything learnt in the first
            for off, entry in zip(offsets, everything, strict=True):
                assert jf.entry(off, fields) == _filtered(entry, fields)
                assert jf.entry(off, set(fields)) == _filtered(entry, fields)
                boot, t, some = jf.fields_at(off, fields)
                assert (boot, t) == (entry["_BOOT_ID"], entry["__REALTIME_TIMESTAMP"])
                assert some == {k: v for k, v in entry.items() if k in fields}
        sel = jf._selections[fields]
        if online:
            assert not sel.closed
        elif "MESSAGE" not in fields:  # short FIELD lists: learnt completely, unwanted items skipped unread
            assert sel.closed


def test_restart_analysis_decodes_only_what_it_needs(journals, monkeypatch):
    """Structured records are read for their few shared values; MESSAGE only where a text pattern
    may apply (no MESSAGE_ID) and for the samples; every other DATA object stays unread."""
    decoded: list[str] = []
    load = JournalFile._load_data

    def counting(self: JournalFile, off: int, verify: bool = True) -> tuple[str, object]:
        kv = load(self, off, verify)
        decoded.append(kv[0])
        return kv  # type: ignore[return-value]

    monkeypatch.setattr(JournalFile, "_load_data", counting)
    with open_directory(journals["keyed"]) as j:
        report = analyze_restarts(j)
        examined = j.scan.entries_examined
    assert report.units
    assert set(decoded) <= _FIELDS | {"MESSAGE", "_BOOT_ID"}  # _BOOT_ID: one per boot, to check entries
    # a full decode would read every item of every examined entry (20+ each)
    assert len(decoded) < 4 * examined


def test_a_walk_over_scattered_objects_stops_at_its_read_budget(tmp_path):
    """One ``_PID`` object per process, each written far from the last (a 9 KiB message between):
    walking that FIELD list costs a page read per step, so the walk gives up at ``_WALK_READS`` reads
    and probing goes on alone, with the same values as a full decode."""
    have_tools()
    host = Host(5)
    host.new_boot(1_733_000_000_000_000)
    rng = random.Random(5)
    export = []
    for i in range(3 * selection._WALK_READS):
        host.at(host.mono + 1000)
        export.append(host.service("app.service", "app", rng.randbytes(4500).hex(), 1000 + i))
    write_journal(b"".join(export), tmp_path, compress=False)
    f = journal_file(tmp_path)
    full = JournalFile.open(f)
    jf = JournalFile.open(f)
    fields = frozenset({"_PID", "MESSAGE_ID"})
    for off in full.entry_offsets():
        entry = full.entry(off)
        assert jf.fields_at(off, fields)[2] == {"_PID": entry["_PID"]}
    sel = jf._selections[fields]
    assert not sel.closed and not sel.walk  # given up: every item probed from then on
    # one walk call (32 steps) may end past the budget, not more
    assert selection._WALK_READS <= sel.reads < selection._WALK_READS + 40
    assert sel.walked < 2 * selection._WALK_READS
    full.close()
    jf.close()
