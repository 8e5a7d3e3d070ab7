"""Merging the reports of several parts (an instance's audit and soak, the hosts of a fleet or a host
list) into one report about the AMI, the fleet or the list.

It lives with the report, beside the one verdict function it calls, and not with the AWS access
(``imagelint.aws``), which fetches what the hosts sent but judges nothing; ``ami``, ``fleet`` and
``--hosts`` all merge through it.

How: the remote reports (``audit`` for the image and host scopes, ``soak`` for the soak scope) are
read back into :class:`~imagelint.report.Report` objects and combined:

- target: ``{"kind": "ami", "path": "<region>:<ami id>", ...}`` (or ``"fleet"`` with the selector);
- scopes: the union, in order; started_at: the earliest; duration: the sum;
- rules: one result per rule id; where two reports evaluated the same rule, the result that did
  something wins over ``skipped``/``not-applicable``, and ``error`` and ``fail`` win over ``pass``;
- findings, errors, warnings and notes: concatenated; each finding gets ``evidence.scope`` (which
  remote command found it) and, in fleet mode, ``evidence.instance_id``, and its subject is
  prefixed with the instance id;
- rule results: the ``omitted*`` counts of the same rule in several reports add up, so the merged
  counts stay true;
- verdict: :func:`imagelint.report.verdict.decide` on the merged report (the one decision): any
  failing finding → fail; else any error (an unreadable or missing part) → inconclusive; else pass.
  Part verdicts are not trusted: a report an instance sent is re-decided on its findings.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from imagelint import __version__
from imagelint.report import Finding, Report, ReportError, RuleResult, Verdict
from imagelint.report.model import Outcome
from imagelint.report.verdict import decide
from imagelint.rulepacks.model import Severity

_OUTCOME_RANK = {
    Outcome.SKIPPED: 0,
    Outcome.NOT_APPLICABLE: 1,
    Outcome.PASS: 2,
    Outcome.WAIVED: 3,
    Outcome.FAIL: 4,
    Outcome.ERROR: 5,
}


def merge(
    parts: list[tuple[str, Report]], target: dict[str, Any], *, instance_id: str | None = None
) -> Report:
    """``parts``: (label, report) pairs, e.g. ("audit", …), ("soak", …)."""
    if not parts:
        return empty_report(target, "no reports")
    rules: dict[str, RuleResult] = {}
    findings: list[Finding] = []
    errors: list[ReportError] = []
    warnings: list[ReportError] = []
    notes: list[str] = []
    scopes: list[str] = []
    facts: dict[str, Any] = {}
    for label, report in parts:
        for scope in report.scopes:
            if scope not in scopes:
                scopes.append(scope)
        for result in report.rules:
            kept = rules.get(result.rule_id)
            if kept is None:
                rules[result.rule_id] = replace(result)  # a copy: the parts' own counts stay as they are
                continue
            omitted = (
                kept.omitted + result.omitted,
                kept.omitted_failing + result.omitted_failing,
                kept.omitted_waived + result.omitted_waived,
            )
            if _OUTCOME_RANK[result.outcome] > _OUTCOME_RANK[kept.outcome]:
                rules[result.rule_id] = kept = replace(result)
            kept.omitted, kept.omitted_failing, kept.omitted_waived = omitted
        for finding in report.findings:
            finding.evidence = {**finding.evidence, "scope": label}
            if instance_id:
                finding.evidence["instance_id"] = instance_id
                finding.subject = f"{instance_id}: {finding.subject}"
            findings.append(finding)
        prefix = f"{instance_id} {label}" if instance_id else label
        errors += [ReportError(e.message, e.rule_id, _where(prefix, e.where)) for e in report.errors]
        warnings += [ReportError(w.message, w.rule_id, _where(prefix, w.where)) for w in report.warnings]
        notes += report.notes
        facts[label] = {
            "verdict": report.verdict.value,
            "target": report.target,
            "tool_version": report.tool_version,
            **report.facts,
        }
    first = parts[0][1]
    merged = Report(
        tool_version=__version__,
        target=target,
        scopes=scopes,
        started_at=min(r.started_at for _, r in parts),
        duration_s=sum(r.duration_s for _, r in parts),
        fail_on=first.fail_on,
        verdict=Verdict.INCONCLUSIVE,  # decided below, on the merged findings
        rule_packs=first.rule_packs,
        config=first.config,
        rules=list(rules.values()),
        findings=findings,
        errors=errors,
        warnings=warnings,
        notes=notes,
        facts=facts,
    )
    merged.verdict = decide(merged)
    return merged


def _where(prefix: str, where: str | None) -> str:
    """Where a part's error is in the merged report: the part's label, then its own place (once:
    an empty part's error is already placed at the part)."""
    return f"{prefix}: {where}" if where and where != prefix else prefix


def empty_report(target: dict[str, Any], reason: str) -> Report:
    """An inconclusive report for a target nothing came back from."""
    return Report(
        tool_version=__version__,
        target=target,
        scopes=[],
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        duration_s=0.0,
        fail_on=Severity.HIGH,
        verdict=Verdict.INCONCLUSIVE,
        rule_packs=[],
        config=None,
        rules=[],
        findings=[],
        errors=[ReportError(reason, where=str(target.get("path")))],
    )


def with_rows(report: Report, rows: list[dict[str, Any]], *, facts_key: str, name_key: str) -> Report:
    """``report`` (the merge of every host's) judged again on all it holds, with a row per host as
    its facts and a note line per host before its own notes."""
    report.verdict = decide(report)
    report.facts = {facts_key: rows}
    report.notes = [
        f"{r[name_key]}: {r['coverage']}, {r['verdict'] or 'not checked'} ({r['failing']} failing, "
        f"{r['findings']} finding(s), {r['errors']} error(s))"
        for r in rows
    ] + report.notes
    return report
