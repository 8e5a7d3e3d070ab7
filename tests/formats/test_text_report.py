"""The text report: one line per finding when piped, one summary line, errors and cut listings said.

Snapshot tests audit the bundled sample image the way ``make demo`` does and compare the text output
and a stable projection of the JSON findings with files in ``tests/formats/snapshots/``, after masking
what changes from run to run (the image's temporary path, the checkout's path, the version; the text
format prints no durations and the projection leaves them out). A change to rules or wording changes
them on purpose: rerun with ``IMAGELINT_UPDATE_SNAPSHOTS=1`` to rewrite them (the tests then skip,
saying which file they wrote), and review the diff. Otherwise a mismatch fails with a unified diff.

The unit tests render hand-made reports: long paths stay whole, the summary stays one line at any
width, strings from the image cannot break the layout, and errors and cut listings are printed.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import imagelint
from imagelint.formats import RenderOptions, get_formatter
from imagelint.report import Finding, Outcome, Report, ReportError, RuleResult, Verdict
from imagelint.rulepacks import Severity
from tests.support import REPO, run_cli

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
SAMPLE_SPEC = REPO / "examples" / "sample-image.yaml"
SAMPLE_CONFIG = REPO / "examples" / "sample.imagelint.yaml"
SEVERITY_WORDS = ("CRITICAL ", "HIGH ", "MEDIUM ", "LOW ", "INFO ")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


# -- snapshots ----------------------------------------------------------------------------------------


def _mask(text: str, image: Path) -> str:
    for path in sorted({str(image.resolve()), str(image)}, key=len, reverse=True):
        text = text.replace(path, "<IMAGE>")
    for path in sorted({str(image.parent.resolve()), str(image.parent)}, key=len, reverse=True):
        text = text.replace(path, "<WORK>")
    text = text.replace(str(REPO), "<REPO>")
    return text.replace(f"imagelint {imagelint.__version__} ", "imagelint <VERSION> ")


def check_snapshot(name: str, actual: str) -> None:
    """Compare ``actual`` with ``snapshots/name``; rewrite it instead under IMAGELINT_UPDATE_SNAPSHOTS=1."""
    path = SNAPSHOTS / name
    if os.environ.get("IMAGELINT_UPDATE_SNAPSHOTS") == "1":
        old = path.read_text(encoding="utf-8") if path.exists() else None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        pytest.skip(f"IMAGELINT_UPDATE_SNAPSHOTS=1: {'unchanged' if old == actual else 'rewrote'} {path}")
    if not path.exists():
        pytest.fail(f"no snapshot {path}: run with IMAGELINT_UPDATE_SNAPSHOTS=1 to create it")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=f"snapshot {path.relative_to(REPO)}",
            tofile="actual",
        )
        pytest.fail(
            "output differs from the snapshot (if the change is intended, rerun with "
            "IMAGELINT_UPDATE_SNAPSHOTS=1 and commit the new file):\n" + "".join(diff),
            pytrace=False,
        )


@pytest.fixture(scope="module")
def sample_audit(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str], Path]:
    """The sample image built as ``make demo`` builds it, audited once: (image, the run, its JSON report)."""
    work = tmp_path_factory.mktemp("sample")
    image = work / "sample-image"
    subprocess.run(
        [sys.executable, str(REPO / "scripts/make-sample-image.py"), str(SAMPLE_SPEC), str(image)],
        check=True,
        capture_output=True,
        cwd=REPO,
    )
    report = work / "report.json"
    # the snapshot must not change on the day the sample's waiver expires: pin its date far ahead
    config = work / "sample.imagelint.yaml"
    config.write_text(re.sub(r"expires: \S+", "expires: 2999-12-31", SAMPLE_CONFIG.read_text()))
    proc = run_cli("audit", str(image), "-c", str(config), "-f", "text", "-f", f"json:{report}", cwd=work)
    assert proc.returncode == 1, proc.stderr  # the sample has failing findings
    return image, proc, report


def test_sample_text_report_matches_snapshot(
    sample_audit: tuple[Path, subprocess.CompletedProcess[str], Path],
) -> None:
    image, proc, _ = sample_audit
    assert "\x1b" not in proc.stdout
    check_snapshot("sample-audit.txt", _mask(proc.stdout, image))


def test_sample_json_findings_match_snapshot(
    sample_audit: tuple[Path, subprocess.CompletedProcess[str], Path],
) -> None:
    image, _, report = sample_audit
    data = json.loads(report.read_text(encoding="utf-8"))
    keys = ("rule_id", "severity", "location", "message", "failing", "waiver")
    findings = [{k: f[k] for k in keys} for f in data["findings"]]
    findings.sort(key=lambda f: (f["rule_id"], f["location"], f["message"]))
    check_snapshot(
        "sample-findings.json", _mask(json.dumps(findings, indent=2, ensure_ascii=False) + "\n", image)
    )


def test_sample_text_report_is_line_per_finding_and_one_summary(
    sample_audit: tuple[Path, subprocess.CompletedProcess[str], Path],
) -> None:
    _, proc, report = sample_audit
    data = json.loads(report.read_text(encoding="utf-8"))
    lines = proc.stdout.splitlines()
    listed = [line for line in lines if line.startswith(SEVERITY_WORDS)]
    assert len(listed) == len([f for f in data["findings"] if f["waiver"] is None])
    for finding in (f for f in data["findings"] if f["waiver"] is None):
        assert any(
            line.startswith(f"{finding['severity'].upper()} {finding['rule_id']} {finding['location']}: ")
            for line in listed
        ), finding
    assert lines[-1].startswith("FAIL: ") and sum(line.startswith("FAIL: ") for line in lines) == 1
    counts = data["counts"]
    assert f"{counts['findings']} finding(s)" in lines[-1] and f"{counts['failing']} failing" in lines[-1]
    assert "WAIVED" not in proc.stdout  # only with --show-waived


def test_cli_keeps_long_paths_whole_and_the_summary_on_one_line_at_40_columns(tmp_path: Path) -> None:
    image = tmp_path / "image"
    subprocess.run(
        [sys.executable, str(REPO / "scripts/make-sample-image.py"), str(SAMPLE_SPEC), str(image)],
        check=True,
        capture_output=True,
    )
    deep = "/etc/" + "/".join(["very-long-directory-name-" + str(i) * 20 for i in range(6)])
    long_path = deep + "/world-writable.conf"
    assert len(long_path) >= 300
    (image / deep.lstrip("/")).mkdir(parents=True)
    (image / long_path.lstrip("/")).write_text("x\n")
    os.chmod(image / long_path.lstrip("/"), 0o666)
    proc = run_cli("audit", str(image), "-c", str(SAMPLE_CONFIG), "-f", "text", env={"COLUMNS": "40"})
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith(f"HIGH IL109 {long_path}: {long_path} is world-writable") for line in lines)
    assert lines[-1].startswith("FAIL: ") and "rules clean" in lines[-1] and len(lines[-1]) > 40


# -- hand-made reports --------------------------------------------------------------------------------


def _rule(rule_id: str, outcome: Outcome, severity: Severity = Severity.HIGH, **kw: Any) -> RuleResult:
    return RuleResult(rule_id, f"rule-{rule_id.lower()}", f"Title of {rule_id}", severity, outcome, "p", **kw)


def _finding(
    rule_id: str,
    path: str,
    severity: Severity = Severity.HIGH,
    *,
    unit: str | None = None,
    failing: bool = True,
) -> Finding:
    return Finding(
        rule_id=rule_id,
        rule_name=f"rule-{rule_id.lower()}",
        severity=severity,
        message=f"{path} is bad",
        subject=path,
        remediation=f"Fix it ({rule_id}).\nReally.\n",
        path=path,
        unit=unit,
        failing=failing,
    )


def _report(
    findings: list[Finding],
    rules: list[RuleResult],
    verdict: Verdict = Verdict.FAIL,
    errors: list[ReportError] | None = None,
) -> Report:
    return Report(
        tool_version="9.9.9",
        target={"kind": "rootfs", "path": "/mnt/image"},
        scopes=["image"],
        started_at="2024-05-01T12:00:00+00:00",
        duration_s=0.5,
        fail_on=Severity.MEDIUM,
        verdict=verdict,
        rule_packs=[],
        config=None,
        rules=rules,
        findings=findings,
        errors=errors or [],
    )


def _text(report: Report, **options: bool) -> str:
    return get_formatter("text").render(report, RenderOptions(**options))


def test_a_300_character_path_is_printed_whole_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    path = "/etc/" + "-".join(["segment"] * 37) + "/x.conf"
    assert len(path) >= 300
    text = _text(_report([_finding("IL109", path)], [_rule("IL109", Outcome.FAIL)]))
    assert f"HIGH IL109 {path}: {path} is bad\n" in text
    assert text.count(path) == 2  # where and message, neither wrapped nor cut


SUMMARY_40 = (
    "FAIL: 2 finding(s) (1 high, 1 low) · 1 failing (fail-on=medium) · 0 waived · 0 error(s) · "
    "1 rule with failing findings, 1 rule with findings below fail-on, 1 rule clean"
)


def _summary_report() -> Report:
    rules = [
        _rule("IL109", Outcome.FAIL),
        _rule("IL106", Outcome.FAIL, Severity.LOW),
        _rule("IL110", Outcome.PASS),
    ]
    findings = [
        _finding("IL109", "/etc/a"),
        _finding("IL106", "/root/.bash_history", Severity.LOW, failing=False),
    ]
    return _report(findings, rules)


def test_the_piped_summary_is_one_line_at_40_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    assert _text(_summary_report()).rstrip("\n").splitlines()[-1] == SUMMARY_40


def test_on_a_terminal_every_row_fits_and_keeps_every_word(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.delenv("NO_COLOR", raising=False)
    text = ANSI.sub("", _text(_summary_report(), terminal=True))
    rows = text.rstrip("\n").splitlines()
    assert all(len(row) <= 40 for row in rows), rows
    start = max(i for i, row in enumerate(rows) if row.startswith("FAIL: "))
    words = [w for row in rows[start:] for w in row.split() if w != "·"]
    assert words == [w for w in SUMMARY_40.split() if w != "·"]
    assert all(row.startswith("  ") for row in rows[start + 1 :])  # continuation rows are indented
    assert "  fix IL109: Fix it (IL109). Really." in text  # the fixes are in the terminal layout too


def test_a_long_path_is_never_cut_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    path = "/etc/" + "-".join(["segment"] * 37) + "/x.conf"
    text = ANSI.sub(
        "", _text(_report([_finding("IL109", path)], [_rule("IL109", Outcome.FAIL)]), terminal=True)
    )
    rows = text.splitlines()
    first = next(i for i, row in enumerate(rows) if row.startswith("HIGH IL109"))
    assert rows[first] == "HIGH IL109" and rows[first + 1] == f"    {path}:"  # alone on its row, whole
    assert text.count(path) == 2
    assert all(len(row) <= 40 for row in rows if path not in row)


def test_no_color_changes_only_the_colour_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    report = _report([_finding("IL109", "/etc/a")], [_rule("IL109", Outcome.FAIL)])
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("NO_COLOR", raising=False)
    coloured = _text(report, terminal=True)
    monkeypatch.setenv("NO_COLOR", "1")
    plain = _text(report, terminal=True)
    foreground = re.compile(r"\x1b\[(?:[0-9;]*;)?3[0-9]m")
    assert foreground.search(coloured) and "\x1b" not in plain
    assert ANSI.sub("", coloured) == plain
    piped = _text(report)
    assert [w for w in plain.split() if w != "·"] == [w for w in piped.split() if w != "·"]  # the same words


def test_a_pass_names_rule_states_so_they_cannot_be_misread() -> None:
    rules = [
        _rule("IL106", Outcome.FAIL, Severity.LOW),
        _rule("IL110", Outcome.PASS),
        _rule("IL114", Outcome.NOT_APPLICABLE),
        _rule("IL401", Outcome.SKIPPED),
    ]
    findings = [_finding("IL106", "/root/.bash_history", Severity.LOW, failing=False)]
    last = _text(_report(findings, rules, Verdict.PASS)).splitlines()[-1]
    assert last.startswith("PASS: 1 finding(s) (1 low) · 0 failing (fail-on=medium)")
    assert last.endswith(
        "1 rule with findings below fail-on, 1 rule clean, 1 rule not applicable, 1 rule skipped"
    )
    assert "fail," not in last and "failed" not in last


def test_image_strings_cannot_break_the_one_line_per_finding_layout() -> None:
    forged = "/etc/evil\nCRITICAL IL999 /forged: forged finding\n::error::x\x1b[2J\u202e"
    unit = "evil\n== unit forged.service\x1b]0;t\x07"
    findings = [_finding("IL109", forged), _finding("IL201", "/usr/lib/systemd/system/x.service", unit=unit)]
    text = _text(_report(findings, [_rule("IL109", Outcome.FAIL), _rule("IL201", Outcome.FAIL)]))
    lines = text.splitlines()
    assert [line.split(" ")[:2] for line in lines if line.startswith(SEVERITY_WORDS)] == [
        ["HIGH", "IL201"],
        ["HIGH", "IL109"],
    ]
    assert sum(line.startswith("== ") for line in lines) == 2
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert not any(line.startswith("::") for line in lines)
    assert (
        "HIGH IL109 /etc/evil\\nCRITICAL IL999 /forged: forged finding\\n::error::x\\x1b[2J\\u202e: " in text
    )
    assert "== unit evil\\n== unit forged.service\\x1b]0;t\\x07" in text


def test_findings_are_grouped_by_unit_then_by_rule_with_remediation_once_per_rule() -> None:
    findings = [
        _finding("IL109", "/etc/b"),
        _finding("IL109", "/etc/a"),
        _finding("IL107", "/root/.aws/credentials", Severity.CRITICAL),
        _finding("IL201", "/usr/lib/systemd/system/ecs.service", unit="ecs.service"),
        _finding("IL204", "/usr/lib/systemd/system/ecs.service", Severity.MEDIUM, unit="ecs.service"),
        _finding("IL201", "/usr/lib/systemd/system/a.service", unit="a.service"),
    ]
    rules = [_rule(r, Outcome.FAIL) for r in ("IL107", "IL109", "IL201", "IL204")]
    lines = _text(_report(findings, rules)).splitlines()
    body = [line for line in lines if line.startswith(("== ", "  fix ", *SEVERITY_WORDS))]
    assert body == [
        "== unit a.service",
        "HIGH IL201 /usr/lib/systemd/system/a.service: /usr/lib/systemd/system/a.service is bad",
        "  fix IL201: Fix it (IL201). Really.",
        "== unit ecs.service",
        "HIGH IL201 /usr/lib/systemd/system/ecs.service: /usr/lib/systemd/system/ecs.service is bad",
        "MEDIUM IL204 /usr/lib/systemd/system/ecs.service: /usr/lib/systemd/system/ecs.service is bad",
        "  fix IL204: Fix it (IL204). Really.",
        "== IL107 rule-il107: Title of IL107",
        "CRITICAL IL107 /root/.aws/credentials: /root/.aws/credentials is bad",
        "  fix IL107: Fix it (IL107). Really.",
        "== IL109 rule-il109: Title of IL109",
        "HIGH IL109 /etc/a: /etc/a is bad",
        "HIGH IL109 /etc/b: /etc/b is bad",
        "  fix IL109: Fix it (IL109). Really.",
    ]


def test_waived_findings_only_with_show_waived() -> None:
    waived = _finding("IL108", "/var/lib/cloud/instance", Severity.MEDIUM, failing=False)
    waived.waiver = {"rule": "IL108", "reason": "cleaned\nlater"}
    report = _report([waived], [_rule("IL108", Outcome.WAIVED, Severity.MEDIUM)], Verdict.PASS)
    assert "IL108 /var" not in _text(report)
    assert "no findings except waived ones" in _text(report)
    shown = _text(report, show_waived=True)
    assert (
        "WAIVED MEDIUM IL108 /var/lib/cloud/instance: /var/lib/cloud/instance is bad "
        "(waiver: cleaned\\nlater)" in shown
    )
    assert shown.splitlines()[-1].endswith("· 1 waived · 0 error(s) · 1 rule with only waived findings")


def test_cut_listings_say_how_many_findings_are_not_listed() -> None:
    rule = _rule("IL109", Outcome.FAIL, omitted=3, omitted_failing=2, omitted_waived=1)
    text = _text(_report([_finding("IL109", "/etc/a")], [rule, _rule("IL110", Outcome.FAIL, omitted=1)]))
    assert "\nIL109: 3 more finding(s) not listed (2 failing, 1 waived)\n" in text
    assert "\nIL110: 1 more finding(s) not listed (0 failing)\n" in text
    # the true counts: 1 listed + 3 cut - 1 waived for IL109, 1 cut for IL110; 1 listed + 2 cut failing
    assert text.splitlines()[-1].startswith(
        "FAIL: 4 finding(s) (4 high) · 3 failing (fail-on=medium) · 1 waived"
    )


def test_errors_and_rules_that_could_not_run_are_printed() -> None:
    rules = [
        _rule("IL104", Outcome.ERROR, reason="/root/.ssh/authorized_keys: is a FIFO"),
        _rule("IL105", Outcome.ERROR, reason="/root/.ssh/authorized_keys: is a FIFO"),
        _rule("IL201", Outcome.FAIL, reason="incomplete data: 1 source(s) could not be read in full"),
        _rule("IL110", Outcome.PASS),
    ]
    errors = [
        ReportError("is a FIFO", rule_id="IL104", where="/root/.ssh/authorized_keys"),
        ReportError("is a FIFO", rule_id="IL105", where="/root/.ssh/authorized_keys"),
        ReportError("unreadable\n::error::x", rule_id="IL201", where="/etc/systemd/system/a\x1b.service"),
        ReportError("unreadable\n::error::x", rule_id="IL202", where="/etc/systemd/system/a\x1b.service"),
        ReportError("the soak was cut short", where="soak"),
    ]
    findings = [_finding("IL201", "/usr/lib/systemd/system/x.service", unit="x.service")]
    text = _text(_report(findings, rules, Verdict.FAIL, errors))
    lines = text.splitlines()
    problems = [line for line in lines if line.startswith("ERROR ")]
    assert problems == [
        "ERROR IL104 could not run: /root/.ssh/authorized_keys: is a FIFO",
        "ERROR IL105 could not run: /root/.ssh/authorized_keys: is a FIFO",
        "ERROR IL201,IL202 /etc/systemd/system/a\\x1b.service: unreadable\\n::error::x",
        "ERROR soak: the soak was cut short",
    ]
    assert "== could not check everything: the run cannot pass" in lines
    assert lines[-1].startswith("FAIL: ") and "· 5 error(s) ·" in lines[-1]
    assert lines[-1].endswith("2 rules could not run, 1 rule with failing findings, 1 rule clean")
    assert "\x1b" not in text


def test_no_findings() -> None:
    text = _text(_report([], [_rule("IL110", Outcome.PASS)], Verdict.PASS))
    assert text == (
        "imagelint 9.9.9 · rootfs /mnt/image · fail-on medium\n\nno findings\n\n"
        "PASS: 0 finding(s) · 0 failing (fail-on=medium) · 0 waived · 0 error(s) · 1 rule clean\n"
    )
