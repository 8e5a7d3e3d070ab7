"""The gate decides once, on every finding, before any listing is cut (issue 11, defects 1 and 2)."""

from __future__ import annotations

import ast
import json
from dataclasses import replace
from pathlib import Path

from imagelint.report import Finding, Outcome, Report, ReportError, RuleResult, Verdict, report_from_dict
from imagelint.report.merge import merge
from imagelint.report.verdict import decide, finding_fails, fold_evidence
from imagelint.rulepacks import Severity
from tests.support import REPO, os_root, run_cli

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
    root = os_root(tmp_path / "img", {f"/data/f{i:03d}": "" for i in range(101)})
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


# -- one fault, one failing finding: a combining rule carries the failure of the evidence it names --


def _on_unit(rule_id: str, unit: str, *, failing: bool = True, severity: Severity = Severity.HIGH) -> Finding:
    return Finding(rule_id, rule_id.lower(), severity, "m", unit, "r", unit=unit, failing=failing)


def test_a_failing_combining_finding_carries_the_evidence_on_its_unit_only() -> None:
    loop, exec_missing, elsewhere, other_rule = (
        _on_unit("IL206", "ecs.service", severity=Severity.CRITICAL),
        _on_unit("IL201", "ecs.service"),
        _on_unit("IL201", "other.service"),  # the same rule on another unit stands alone
        _on_unit("IL204", "ecs.service"),  # a rule the combining one does not name stands alone
    )
    findings = [exec_missing, loop, elsewhere, other_rule]  # order does not matter
    fold_evidence(findings, {"IL206": ("IL201", "IL203")})
    assert [(f.rule_id, f.unit, f.failing, f.part_of) for f in findings] == [
        ("IL201", "ecs.service", False, "IL206"),
        ("IL206", "ecs.service", True, None),
        ("IL201", "other.service", True, None),
        ("IL204", "ecs.service", True, None),
    ]


def test_folding_never_changes_a_verdict() -> None:
    """Only a failing finding absorbs, and never an always-fail rule's: the verdict is the same."""
    waived_loop = _on_unit("IL206", "a.service", failing=False)  # waived or under --fail-on-new
    evidence = _on_unit("IL201", "a.service")
    expired = _on_unit("IL001", "a.service")  # a rule tagged always-fail
    loop = _on_unit("IL206", "b.service")
    below = _on_unit("IL202", "b.service", failing=False)  # below fail-on: nothing to carry
    findings = [waived_loop, evidence, expired, loop, below]
    before = decide(_report(list(findings), [_rule()]))
    fold_evidence(findings, {"IL206": ("IL201", "IL001", "IL202")}, always_fail={"IL001"})
    assert evidence.failing and evidence.part_of is None  # its carrier does not fail
    assert expired.failing and below.part_of is None
    assert decide(_report(findings, [_rule()])) is before is Verdict.FAIL
    only_evidence = [_on_unit("IL206", "c.service", failing=False), _on_unit("IL201", "c.service")]
    fold_evidence(only_evidence, {"IL206": ("IL201",)})
    assert decide(_report(only_evidence, [_rule()])) is Verdict.FAIL


FAULTY_UNIT = {
    "/usr/lib/systemd/system/agent.service": (
        "[Service]\nExecStart=/usr/bin/agent\nRestart=on-failure\nRestartSec=10\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    ),
    "/etc/systemd/system/multi-user.target.wants/agent.service": {
        "link": "/usr/lib/systemd/system/agent.service"
    },
}


def test_an_audit_lists_the_evidence_as_part_of_the_loop_in_every_format(tmp_path: Path) -> None:
    root = os_root(tmp_path / "img", FAULTY_UNIT)
    (tmp_path / "cfg.yaml").write_text("expected-units: [agent.service]\n")
    out, sarif = tmp_path / "report.json", tmp_path / "report.sarif"
    proc = run_cli(
        "audit", str(root), "-c", str(tmp_path / "cfg.yaml"), "--select", "IL201,IL202,IL206",
        "--fail-on", "low", "-f", "text", "-f", f"json:{out}", "-f", f"sarif:{sarif}",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    data = json.loads(out.read_text())
    states = sorted((f["rule_id"], f["failing"], f.get("part_of")) for f in data["findings"])
    assert states == [("IL201", False, "IL206"), ("IL202", False, "IL206"), ("IL206", True, None)]
    assert data["counts"]["failing"] == 1 and data["counts"]["findings"] == 3
    assert "HIGH IL201 /usr/lib/systemd/system/agent.service:2:" in proc.stdout
    assert proc.stdout.count("(part of IL206)") == 2
    assert "1 failing (fail-on=low) · 2 part of a failing finding" in proc.stdout
    assert "2 rules with findings part of another rule's" in proc.stdout
    results = json.loads(sarif.read_text())["runs"][0]["results"]
    assert sorted(r["properties"].get("partOf", "") for r in results) == ["", "IL206", "IL206"]
    back = report_from_dict(data)  # the mark survives a JSON round trip (baselines, diffs, merges)
    assert sorted(f.part_of or "" for f in back.findings) == ["", "IL206", "IL206"]
    assert decide(back) is Verdict.FAIL
