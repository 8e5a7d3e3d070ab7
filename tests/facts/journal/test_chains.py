"""Hash chains and field data lists (``chains``): indexed lookups (``JournalFile.match_offsets``)
against the entries decoded one by one, and a field's data list that loops.

Whatever shortcut the lookup takes (a single value's list used as it is, an AND kept as the smaller
side's set), its answer is the entries, in file order, whose decoded fields satisfy the matches:
values of one field OR'd, fields AND'ed, entries having a field named in ``without`` left out.
"""

from __future__ import annotations

import shutil
import struct
from contextlib import closing

import pytest

from imagelint.facts.journal import CorruptJournal, JournalFile
from imagelint.facts.journal.patterns import RESTART_SCHEDULED, UNIT_FAILED, UNIT_PROCESS_EXIT
from tests.facts.journal.conftest import journal_file

CASES = [
    ({"_UID": "0"}, ()),  # shared by most entries
    ({"_PID": "1"}, ()),
    ({"_PID": "1", "_UID": "0"}, ()),  # a small side and a large one
    ({"_UID": "0", "_PID": "1"}, ()),  # the same, the large side first
    ({"_PID": "1", "_UID": "0"}, ("MESSAGE_ID",)),
    ({"MESSAGE_ID": (RESTART_SCHEDULED, UNIT_FAILED, UNIT_PROCESS_EXIT)}, ()),
    ({"MESSAGE_ID": (RESTART_SCHEDULED, RESTART_SCHEDULED)}, ()),  # a value twice
    ({"MESSAGE_ID": (RESTART_SCHEDULED, "0" * 32)}, ()),  # a value no entry has
    ({"_TRANSPORT": ("kernel", "journal"), "PRIORITY": ("4", "6")}, ("UNIT",)),
    ({"_TRANSPORT": "kernel"}, ()),
    ({"_TRANSPORT": "kernel", "NO_SUCH_FIELD": "x"}, ()),
    ({}, ()),
]


def _values(entry: dict[str, object], name: str) -> list[object]:
    value = entry.get(name)
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _expected(jf: JournalFile, matches: dict[str, object], without: tuple[str, ...]) -> list[int]:
    out = []
    for off in jf.entry_offsets():
        entry = jf.entry(off)
        ok = bool(matches) and all(
            set(_values(entry, name)) & ({wanted} if isinstance(wanted, str) else set(wanted))
            for name, wanted in matches.items()
        )
        if ok and not any(name in entry for name in without):
            out.append(off)
    return out


@pytest.mark.parametrize("layout", ["keyed", "legacy", "plain"])
def test_lookups_equal_the_decoded_entries(journals, layout):
    jf = JournalFile.open(journal_file(journals[layout]))
    try:
        for matches, without in CASES:
            expected = _expected(jf, matches, without)
            assert jf.match_offsets(matches, without) == expected, (matches, without)
        assert any(_expected(jf, m, w) for m, w in CASES[:6])  # the cases are not all empty
    finally:
        jf.close()


def _looped_list(journals, tmp_path, field: str) -> tuple[JournalFile, int]:
    """A copy of a real journal whose data list of ``field`` loops: its last DATA object links back
    to its first (the list must run towards the start of the file). The link is not hashed, so
    nothing else in the file is wrong. Returns the file, opened, and the object changed."""
    path = tmp_path / "looped.journal"
    shutil.copyfile(journal_file(journals["keyed"]), path)
    with closing(JournalFile.open(path)) as jf:
        chain = list(jf._field_data(field))
    assert len(chain) >= 2, chain  # a list to loop
    with open(path, "r+b") as f:
        f.seek(chain[-1] + 32)  # DataObject.next_field_offset
        f.write(struct.pack("<Q", chain[0]))
    return JournalFile.open(path), chain[-1]


def test_a_looping_field_data_list_is_damage_to_every_reader_of_it(journals, tmp_path):
    """``field_values``, a match ``without`` a field and the boot-id check of an entry all read a
    FIELD's data list: a list that loops is ``CorruptJournal`` to each of them, never a spin."""
    jf, last = _looped_list(journals, tmp_path, "PRIORITY")
    with closing(jf), pytest.raises(CorruptJournal, match="field's data chain loops") as exc:
        list(jf.field_values("PRIORITY"))
    assert exc.value.offset == last
    jf, _ = _looped_list(journals, tmp_path, "PRIORITY")
    with closing(jf), pytest.raises(CorruptJournal, match="field's data chain loops"):
        jf.match_offsets({"_TRANSPORT": ("kernel", "journal")}, ("PRIORITY",))
    jf, _ = _looped_list(journals, tmp_path, "_BOOT_ID")
    with closing(jf):
        first = next(jf.entry_offsets())
        with pytest.raises(CorruptJournal, match="field's data chain loops"):
            jf.entry(first)
        assert jf.entry(first)["__SEQNUM"]  # a problem once, then entries go unchecked against it
