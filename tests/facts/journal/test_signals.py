"""The generic signal matcher against journalctl's index plus its own --grep (PCRE2)."""

from __future__ import annotations

from collections import defaultdict

import pytest

from imagelint.facts.journal import SIGNALS, count_signal, open_directory
from tests.facts.journal.conftest import journalctl_json


@pytest.mark.parametrize("name", sorted(SIGNALS))
def test_signal_counts_per_boot_equal_journalctl_grep(journals, name):
    spec = SIGNALS[name]
    d = journals["keyed"]
    terms = [f"{k}={v}" for k, vs in spec.matches.items() for v in ([vs] if isinstance(vs, str) else vs)]
    expected = defaultdict(list)
    for e in journalctl_json(f"--directory={d}", *terms, f"--grep={spec.message}", "--case-sensitive=true"):
        expected[e["_BOOT_ID"]].append(int(e["__REALTIME_TIMESTAMP"]))
    with open_directory(d) as j:
        report = count_signal(j, spec)
    assert {b.boot_id: b.times for b in report.boots} == dict(expected)
    assert report.total == sum(len(v) for v in expected.values())


def test_scenario_contains_signals(journals):
    with open_directory(journals["keyed"]) as j:
        totals = {name: count_signal(j, spec).total for name, spec in SIGNALS.items()}
    assert totals["ena-reset"] >= 3 and totals["soft-lockup"] >= 3 and totals["ena-tx-paused"] >= 3


def test_window_and_time_limits(journals):
    spec = SIGNALS["ena-reset"]
    with open_directory(journals["keyed"]) as j:
        full = count_signal(j, spec)
        first = full.boots[0]
        only_first = count_signal(j, spec, until_usec=first.last_usec)
        later = count_signal(j, spec, since_usec=(first.last_usec or 0) + 1)
    assert only_first.total + later.total == full.total
    assert [b.boot_id for b in only_first.boots] == [first.boot_id]
    assert first.max_within(1) == 1 and first.samples and "Trigger reset is on" in first.samples[0]
