"""Restart-loop, start-limit and failure analysis against journalctl's own indexed matches."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

import pytest

from imagelint.facts.journal import analyze_restarts, open_directory
from tests.facts.journal.conftest import journalctl_json
from tests.facts.journal.exportgen import EXITED_ID, FAILED_ID, RESTART_ID


@pytest.mark.parametrize("layout", ["keyed", "legacy"])
def test_restart_counts_rates_failures_and_exits(journals, layout):
    d = journals[layout]
    restarts = defaultdict(list)
    for e in journalctl_json(f"--directory={d}", f"MESSAGE_ID={RESTART_ID}"):
        restarts[(e["UNIT"], e["_BOOT_ID"])].append((int(e["__REALTIME_TIMESTAMP"]), int(e["N_RESTARTS"])))
    failures: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for e in journalctl_json(f"--directory={d}", f"MESSAGE_ID={FAILED_ID}"):
        failures[(e["UNIT"], e["_BOOT_ID"])][e["UNIT_RESULT"]] += 1
    exits = {}
    for e in journalctl_json(f"--directory={d}", f"MESSAGE_ID={EXITED_ID}"):
        exits[(e["UNIT"], e["_BOOT_ID"])] = (e["EXIT_CODE"], e["EXIT_STATUS"], int(e["__REALTIME_TIMESTAMP"]))
    texts = Counter(
        (e["UNIT"], e["_BOOT_ID"])
        for e in journalctl_json(f"--directory={d}", "_PID=1")
        if "MESSAGE_ID" not in e and e["MESSAGE"].endswith("Start request repeated too quickly.")
    )
    total = len(journalctl_json(f"--directory={d}"))

    with open_directory(d) as j:
        report = analyze_restarts(j)
        examined = j.scan.entries_examined
    got = {(u.unit, u.boot_id): u for u in report.units}
    assert set(got) == set(restarts) | set(failures) | set(exits)
    assert len(report.boots) == 3
    for key, rec in got.items():
        times = [t for t, _n in restarts.get(key, [])]
        assert rec.restart_times == times
        assert rec.max_n_restarts == max((n for _t, n in restarts.get(key, [])), default=None)
        if len(times) >= 2:
            assert rec.rate_per_hour == pytest.approx((len(times) - 1) * 3.6e9 / (times[-1] - times[0]))
        assert dict(rec.failures) == dict(failures.get(key, {}))
        code, status, t = exits[key]
        assert rec.last_exit is not None and (
            rec.last_exit.code,
            rec.last_exit.status,
            rec.last_exit.time_usec,
        ) == (code, status, t)
        assert rec.start_limit_hits == max(texts.get(key, 0), failures.get(key, Counter())["start-limit-hit"])
    # the steady 10-second crash loop is caught in every boot although the unit never hits a limit
    ecs = report.for_unit("ecs.service")
    assert len(ecs) == 3 and all(u.restarts >= 50 and u.start_limit_hits == 0 for u in ecs)
    assert all(250 < (u.rate_per_hour or 0) < 360 for u in ecs)  # ~11 s cycles
    assert all(u.max_restarts_within(60) in (5, 6) for u in ecs)
    # both start-limit forms: 252's text line with exit-code, and the structured start-limit-hit
    assert sum(u.start_limit_hits for u in report.for_unit("fluent-bit.service")) == 1
    assert report.for_unit("fluent-bit.service")[0].failures["start-limit-hit"] == 0
    assert sum(u.start_limit_hits for u in report.for_unit("node-exporter.service")) == 1
    # found through the index: far fewer entries decoded than the journal holds
    assert examined < total / 2


def test_samples_are_the_units_own_last_messages(journals):
    d = journals["keyed"]
    own = journalctl_json(f"--directory={d}", "_SYSTEMD_UNIT=ecs.service")
    with open_directory(d) as j:
        report = analyze_restarts(j, samples=2)
    for rec in report.for_unit("ecs.service"):
        mine = [e["MESSAGE"] for e in own if e["_BOOT_ID"] == rec.boot_id]
        expected: list[str] = []
        for m in reversed(mine):
            if m not in expected:
                expected.append(m)
        assert rec.samples == expected[:2]


def test_restart_report_serialises(journals):
    with open_directory(journals["keyed"]) as j:
        data = analyze_restarts(j).to_dict()
    assert data["scan"]["files_read"] == 1
    assert {u["unit"] for u in data["units"]} >= {"ecs.service", "fluent-bit.service"}
    assert all(re.fullmatch(r"[0-9a-f]{32}", u["boot_id"]) for u in data["units"])
