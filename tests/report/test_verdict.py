"""The gate decides once, on every finding, before any listing is cut (issue 11, defects 1 and 2)."""

from __future__ import annotations

import ast
import json
from dataclasses import replace
from pathlib import Path

from imagelint.aws.merge import merge
from imagelint.report import Finding, Outcome, Report, ReportError, RuleResult, Verdict, report_from_dict
from imagelint.report.verdict import decide, finding_fails
from imagelint.rulepacks import Severity
from imagelint.sampletree import build_tree
from tests.support import REPO, run_cli

PACK = """\
pack: {name: data}
rules:
  - id: T100
    name: data-files
    title: Files under /data
    severity: high
    scope: [image]
    check: {kind: file.present, paths: ['/data/*']}
    message: "{path} is present"
    remediation: remove it
"""

WAIVER = """\
version: 1
waivers:
  - rule: T100
    path: /data/f0*
    reason: the first hundred are known
    expires: 2999-01-01
"""


def test_a_waiver_on_the_first_hundred_does_not_hide_the_hundred_and_first(tmp_path: Path) -> None:
    """The repro of the review: 101 findings, 100 waived, the cap used to cut the one that fails."""
    root = build_tree(tmp_path / "img", {f"/data/f{i:03d}": "" for i in range(101)})
    (tmp_path / "pack.yaml").write_text(PACK)
    (tmp_path / "cfg.yaml").write_text(WAIVER)
    out = tmp_path / "report.json"
    proc = run_cli(
        "audit", str(root), "--no-builtin-rules", "-r", str(tmp_path / "pack.yaml"),
        "-c", str(tmp_path / "cfg.yaml"), "-f", f"json:{out}",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    assert data["verdict"] == "fail" and data["counts"]["failing"] == 1 and data["counts"]["waived"] == 100
    listed = [f["path"] for f in data["findings"]]
    assert len(listed) == 100 and "/data/f100" in listed  # the failing one is listed first, never cut
    (rule,) = data["rules"]
    counted = [rule[k] for k in ("findings", "omitted", "omitted_failing", "omitted_waived")]
    assert counted == [101, 1, 0, 1]


def _report(findings: list[Finding], rules: list[RuleResult], verdict: Verdict = Verdict.PASS) -> Report:
    return Report("t", {"kind": "x", "path": "p"}, ["image"], "2026-01-01T00:00:00+00:00", 0.0,
                  Severity.HIGH, verdict, [], None, rules, findings)  # fmt: skip


def _finding(n: int, *, failing: bool, waived: bool = False) -> Finding:
    return Finding("T1", "t1", Severity.HIGH, "m", f"/f{n}", "r", path=f"/f{n}", failing=failing,
                   waiver={"reason": "x"} if waived else None)  # fmt: skip


def _rule(**counts: int) -> RuleResult:
    return RuleResult("T1", "t1", "title", Severity.HIGH, Outcome.FAIL, "p", **counts)  # type: ignore[arg-type]


def test_cutting_the_listing_keeps_failing_findings_and_true_counts() -> None:
    findings = [_finding(i, failing=False, waived=True) for i in range(5)] + [_finding(9, failing=True)]
    report = _report(findings, [_rule(findings=6)])
    before = report.counts()
    report.cut_listing(2)
    assert "/f9" in [f.subject for f in report.findings] and len(report.findings) == 2
    assert report.counts() == before and decide(report) is Verdict.FAIL
    result = report.rules[0]
    assert (result.omitted, result.omitted_waived, result.omitted_failing) == (4, 4, 0)


def test_omitted_failing_findings_alone_still_fail() -> None:
    report = _report([], [_rule(findings=3, omitted=3, omitted_failing=1)])
    assert decide(report) is Verdict.FAIL and report.counts()["failing"] == 1


def test_errors_make_it_inconclusive_and_failing_findings_win() -> None:
    err = ReportError("unreadable", where="/x")
    assert decide(replace(_report([], [_rule()]), errors=[err])) is Verdict.INCONCLUSIVE
    assert decide(replace(_report([_finding(1, failing=True)], [_rule()]), errors=[err])) is Verdict.FAIL
    assert decide(_report([_finding(1, failing=False)], [_rule()])) is Verdict.PASS


def test_finding_fails_follows_fail_on_waivers_and_always_fail() -> None:
    assert finding_fails(Severity.HIGH, Severity.HIGH) and not finding_fails(Severity.MEDIUM, Severity.HIGH)
    assert finding_fails(Severity.LOW, Severity.CRITICAL, ["always-fail"])
    assert not finding_fails(Severity.CRITICAL, Severity.LOW, waived=True)


def test_merge_re_decides_and_sums_what_each_part_omitted() -> None:
    """A part that claims pass while carrying a failing finding is not believed; counts add up."""
    lying = _report([_finding(1, failing=True)], [_rule(findings=101, omitted=100)], Verdict.PASS)
    other = _report([], [_rule(findings=7, omitted=7, omitted_waived=7)], Verdict.PASS)
    merged = merge([("a", lying), ("b", other)], {"kind": "ami", "path": "r:ami-1"})
    assert merged.verdict is Verdict.FAIL
    assert merged.counts()["findings"] == 1 + 100 and merged.counts()["waived"] == 7
    assert lying.rules[0].omitted == 100  # the parts' own results are not changed by the merge


def test_a_json_round_trip_keeps_the_verdict_and_the_counts() -> None:
    report = _report([_finding(i, failing=i == 0) for i in range(3)], [_rule(findings=3)])
    report.cut_listing(1)
    back = report_from_dict(json.loads(json.dumps(report.to_dict())))
    assert decide(back) is decide(report) is Verdict.FAIL and back.counts() == report.counts()


def test_no_module_but_the_verdict_module_compares_severity_with_fail_on() -> None:
    """The gate decides once: nothing else re-derives fail-on or always-fail."""
    offenders = []
    for path in sorted((REPO / "imagelint").rglob("*.py")):
        if path.name == "verdict.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            text = ast.unparse(node) if isinstance(node, ast.Call | ast.Constant) else ""
            if (isinstance(node, ast.Call) and "at_least(" in text and "fail_on" in text) or (
                isinstance(node, ast.Constant) and node.value == "always-fail"
            ):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []
