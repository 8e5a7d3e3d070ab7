"""Indexed lookups (``JournalFile.match_offsets``) against the entries decoded one by one.

Whatever shortcut the lookup takes (a single value's list used as it is, an AND kept as the smaller
side's set), its answer is the entries, in file order, whose decoded fields satisfy the matches:
values of one field OR'd, fields AND'ed, entries having a field named in ``without`` left out.
"""

from __future__ import annotations

import pytest

from imagelint.facts.journal import JournalFile
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
