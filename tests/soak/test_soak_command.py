"""`imagelint soak` as a user runs it, beside a real leaking restarter on this machine's kernel."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.soak.memcg import MemcgLab, judged_against_noise, need_v1_memory
from tests.support import run_cli

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.serial]

LEAK_PERIOD_S = 2.0  # one leaked memcg every 2 s: 1,800 per hour


@pytest.fixture
def lab(request: pytest.FixtureRequest) -> Iterator[MemcgLab]:
    need_v1_memory()
    lab = MemcgLab(request.node.name[:30])
    try:
        yield lab
    finally:
        lab.cleanup()


def _soak(tmp_path: Path, *extra: str) -> tuple[int, dict]:
    out = tmp_path / "soak.json"
    proc = run_cli("soak", "--duration", "40s", "--interval", "2s", "-f", f"json:{out}", *extra, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(out.read_text())


def _outcome(report: dict, rule: str) -> str:
    return next(r["outcome"] for r in report["rules"] if r["rule_id"] == rule)


@pytest.mark.cgroup_v1
def test_leak_is_flagged_with_the_right_order_of_magnitude(lab: MemcgLab, tmp_path: Path) -> None:
    lab.start(LEAK_PERIOD_S, leak=True)
    code, report = _soak(tmp_path)
    lab.stop()
    assert not lab.errors
    produced_per_hour = lab.leaked / 42 * 3600
    growth = [f for f in report["findings"] if f["rule_id"] == "IL401"]
    soak = report["facts"]["soak"]  # on failure: what was leaked against what the soak counted
    assert code == 1 and len(growth) == 1, (
        lab.leaked,
        soak["trend"],
        [s.get("dying") for s in soak["samples"]],
    )
    slope = growth[0]["evidence"]["slope_per_hour"]
    assert produced_per_hour / 3 <= slope <= produced_per_hour * 3, (slope, produced_per_hour)
    assert "at this rate:" in growth[0]["message"]
    assert report["facts"]["soak"]["memory_stat_walk"]["end"]["cgroups"] >= 1


@pytest.mark.cgroup_v1
def test_without_the_restarter_the_soak_passes(tmp_path: Path) -> None:
    need_v1_memory()
    code, report = judged_against_noise(lambda: _soak(tmp_path), lambda r: r[0] == 0)
    assert _outcome(report, "IL401") == "pass", report["facts"]["soak"]["trend"]["dying"]
    assert code == 0, [f["message"] for f in report["findings"]]


@pytest.mark.cgroup_v1
def test_churn_that_frees_its_page_cache_leaks_far_less(lab: MemcgLab, tmp_path: Path) -> None:
    """Restarts that delete their file first: some memcgs still linger (kernel objects charged to
    them), but an order of magnitude fewer than when the page cache stays."""

    def attempt() -> tuple[float, float]:
        restarts_before = lab.restarts
        lab.start(LEAK_PERIOD_S, leak=False)
        _, report = _soak(tmp_path)
        lab.stop()
        assert not lab.errors and lab.restarts - restarts_before >= 10
        made = (lab.restarts - restarts_before) / 42 * 3600
        return report["facts"]["soak"]["trend"]["dying"]["slope_per_hour"], made

    slope, made = judged_against_noise(attempt, lambda r: r[0] < r[1] / 4)
    assert slope < made / 4


@pytest.mark.cgroup_v1
def test_sigterm_ends_early_with_a_complete_report(tmp_path: Path) -> None:
    need_v1_memory()
    out = tmp_path / "soak.json"
    exe = Path(sys.executable).parent / "imagelint"
    proc = subprocess.Popen(
        [exe, "soak", "-d", "10m", "-i", "1s", "-f", f"json:{out}"], stderr=subprocess.PIPE
    )
    time.sleep(6)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    report = json.loads(out.read_text())
    assert proc.returncode == 3 and report["verdict"] == "inconclusive"
    assert report["facts"]["soak"]["cut_short"] is True and len(report["facts"]["soak"]["samples"]) >= 3
    assert any("cut short after" in e["message"] for e in report["errors"])
    assert b"soak " in stderr  # plain progress lines when stderr is not a terminal


def test_bad_duration_is_a_usage_error() -> None:
    proc = run_cli("soak", "--duration", "ten minutes")
    assert proc.returncode == 2
    assert (
        proc.stderr
        == "imagelint: error: --duration 'ten minutes': give a positive duration such as 90s, 10m or 1h\n"
    )


def test_a_passing_soak_still_prints_what_it_measured(tmp_path: Path) -> None:
    proc = run_cli("soak", "--duration", "4s", "--interval", "1s", "-f", "text", timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    out = proc.stdout
    assert re.search(r"^soak: measured \d+ s of 4 s, \d+ sample\(s\) every 1 s$", out, re.M), out
    if "no memory cgroup counts" not in out:
        for name in ("dying", "live"):
            line = re.search(rf"^soak: {name} memcgs [\d,]+ → [\d,]+ at start → end, (.*)$", out, re.M)
            assert line and re.search(r"slope [+-][\d,]+/h .* p-value [\d.e+-]+", line.group(1)), out
    walk = r"[\d,]+ cgroup\(s\) in [\d.]+ ms"
    assert re.search(rf"^soak: memory\.stat walk {walk}.* at start, {walk}.* at end$", out, re.M), out
    assert re.search(r"^soak: restarts .*; (journal: |journal logged \d+ restart)", out, re.M), out
