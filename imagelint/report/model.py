"""The report model: what was audited, with which rules, what was found, and the verdict.

Plain dataclasses with ``to_dict`` for the JSON format; the JSON schema in ``report/schema.json``
describes exactly that dict and a test validates real output against it.
"""

from __future__ import annotations

from dataclasses import asdict, field
from enum import StrEnum
from typing import Any

from imagelint.errors import ExitCode
from imagelint.records import dataclass
from imagelint.rulepacks.model import Severity

REPORT_SCHEMA_VERSION = 1


class Outcome(StrEnum):
    PASS = "pass"  # evaluated, nothing found (or an `unless` condition held)
    FAIL = "fail"  # at least one finding that is not waived
    WAIVED = "waived"  # findings, all waived
    NOT_APPLICABLE = "not-applicable"  # the rule's subject is absent from the target
    ERROR = "error"  # could not be evaluated: makes the run inconclusive
    SKIPPED = "skipped"  # not run: out of this run's scope, or deselected by the config


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"

    @property
    def exit_code(self) -> ExitCode:
        return {Verdict.PASS: ExitCode.PASS, Verdict.FAIL: ExitCode.FAIL}.get(self, ExitCode.INCONCLUSIVE)


@dataclass
class Finding:
    rule_id: str
    rule_name: str
    severity: Severity
    message: str
    subject: str
    remediation: str
    path: str | None = None
    line: int | None = None
    unit: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    waiver: dict[str, Any] | None = None  # the waiver that covers it, if any
    failing: bool = False  # counts towards a failing verdict
    baseline_state: str | None = None  # audit --baseline: new, unchanged or absent (SARIF's words)
    # the rule of the failing finding that names this one as evidence (report.verdict.fold_evidence)
    part_of: str | None = None

    def __post_init__(self) -> None:
        # strings from the image may hold undecodable bytes: see imagelint/report/escape.py
        from imagelint.report.escape import normalise_finding

        normalise_finding(self)

    @property
    def location(self) -> str:
        if self.path and self.line:
            return f"{self.path}:{self.line}"
        return self.path or self.subject


@dataclass
class RuleResult:
    rule_id: str
    name: str
    title: str
    severity: Severity
    outcome: Outcome
    pack: str
    reason: str = ""  # why not applicable / skipped / error; which condition held; what the config changed
    findings: int = 0
    omitted: int = 0  # findings beyond the per-rule listing cap: counted and decided on, not listed
    omitted_failing: int = 0  # of those, how many fail the gate (the verdict counts them)
    omitted_waived: int = 0  # of those, how many are waived
    duration_ms: float = 0.0
    # The rule's documentation, carried so that formats (SARIF rule descriptors) need no rule objects.
    description: str = ""
    remediation: str = ""
    tags: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)


@dataclass
class ReportError:
    message: str
    rule_id: str | None = None
    where: str | None = None

    def __post_init__(self) -> None:
        from imagelint.report.escape import normalise_error

        normalise_error(self)

    def __str__(self) -> str:
        prefix = f"{self.rule_id}: " if self.rule_id else ""
        return f"{prefix}{self.where}: {self.message}" if self.where else f"{prefix}{self.message}"


@dataclass
class Report:
    tool_version: str
    target: dict[str, Any]
    scopes: list[str]
    started_at: str
    duration_s: float
    fail_on: Severity
    verdict: Verdict
    rule_packs: list[dict[str, Any]]
    config: dict[str, Any] | None
    rules: list[RuleResult]
    findings: list[Finding]
    errors: list[ReportError] = field(default_factory=list)
    warnings: list[ReportError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # what was measured (e.g. the soak's samples)
    inventory: dict[str, Any] | None = None  # units, packages, image facts (imagelint.facts.inventory)
    baseline: dict[str, Any] | None = None  # audit --baseline: which report, and the counts by state
    absent_findings: list[Finding] = field(default_factory=list)  # in the baseline, not in this run

    @property
    def active_findings(self) -> list[Finding]:
        """The listed findings that are not waived."""
        return [f for f in self.findings if f.waiver is None]

    @property
    def failing_findings(self) -> list[Finding]:
        """The listed findings that fail the gate (see ``omitted_failing`` for the unlisted ones)."""
        return [f for f in self.findings if f.failing]

    def counts(self) -> dict[str, Any]:
        """True totals: the listed findings plus those a listing cap left out."""
        by_severity = {s.value: 0 for s in Severity}
        for finding in self.active_findings:
            by_severity[finding.severity.value] += 1
        for result in self.rules:
            by_severity[result.severity.value] += result.omitted - result.omitted_waived
        by_outcome = {o.value: 0 for o in Outcome}
        for result in self.rules:
            by_outcome[result.outcome.value] += 1
        omitted = sum(r.omitted for r in self.rules)
        omitted_waived = sum(r.omitted_waived for r in self.rules)
        active = len(self.active_findings) + omitted - omitted_waived
        return {
            "findings": active,
            "failing": len(self.failing_findings) + sum(r.omitted_failing for r in self.rules),
            "waived": len(self.findings) - len(self.active_findings) + omitted_waived,
            "errors": len(self.errors),
            "by_severity": by_severity,
            "rules": by_outcome,
        }

    def cut_listing(self, per_rule: int) -> None:
        """Keep at most ``per_rule`` findings of each rule in the listing, failing ones first.

        Only the listing shrinks: what is cut is counted in the rule's ``omitted*`` fields, so
        :meth:`counts` and :func:`imagelint.report.verdict.decide` still see every finding.
        """
        by_rule: dict[str, list[Finding]] = {}
        for finding in self.findings:
            by_rule.setdefault(finding.rule_id, []).append(finding)
        results = {r.rule_id: r for r in self.rules}
        kept: set[int] = set()
        for rule_id, group in by_rule.items():
            result = results.get(rule_id)
            if len(group) <= per_rule or result is None:
                kept.update(id(f) for f in group)
                continue
            ranked = sorted(group, key=lambda f: (not f.failing, f.waiver is not None))
            listed, cut = ranked[:per_rule], ranked[per_rule:]
            kept.update(id(f) for f in listed)
            result.omitted += len(cut)
            result.omitted_failing += sum(1 for f in cut if f.failing)
            result.omitted_waived += sum(1 for f in cut if f.waiver is not None)
        self.findings = [f for f in self.findings if id(f) in kept]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
            "tool": {"name": "imagelint", "version": self.tool_version},
            "target": self.target,
            "scopes": self.scopes,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 3),
            "fail_on": self.fail_on.value,
            "verdict": self.verdict.value,
            "exit_code": int(self.verdict.exit_code),
            "counts": self.counts(),
            "rule_packs": self.rule_packs,
            "config": self.config,
            "rules": [{**asdict(r), "duration_ms": round(r.duration_ms, 2)} for r in self.rules],
            "findings": [_finding_dict(f) for f in self.findings],
            "errors": [asdict(e) for e in self.errors],
            "warnings": [asdict(w) for w in self.warnings],
            "notes": self.notes,
            "facts": self.facts,
            "inventory": self.inventory,
            "baseline": self.baseline,
            "absent_findings": [_finding_dict(f) for f in self.absent_findings],
        }


def _finding_dict(finding: Finding) -> dict[str, Any]:
    from imagelint.report.fingerprint import fingerprint

    data = {**asdict(finding), "location": finding.location, "fingerprint": fingerprint(finding)}
    if data["part_of"] is None:  # only where a finding was folded: reports without one are unchanged
        del data["part_of"]
    return data


def report_from_dict(data: dict[str, Any]) -> Report:
    """A JSON report (``Report.to_dict()``) back into the model (lossless for findings and counts)."""
    rules = [
        RuleResult(
            **{
                **{k: v for k, v in r.items() if k in RuleResult.__dataclass_fields__},
                "severity": Severity(r["severity"]),
                "outcome": Outcome(r["outcome"]),
            }
        )
        for r in data.get("rules", [])
    ]
    findings = [_finding_from(f) for f in data.get("findings", [])]
    return Report(
        tool_version=str(data.get("tool", {}).get("version", "")),
        target=dict(data.get("target", {})),
        scopes=list(data.get("scopes", [])),
        started_at=str(data.get("started_at", "")),
        duration_s=float(data.get("duration_s", 0.0)),
        fail_on=Severity(data.get("fail_on", "high")),
        verdict=Verdict(data["verdict"]),
        rule_packs=list(data.get("rule_packs", [])),
        config=data.get("config"),
        rules=rules,
        findings=findings,
        errors=[ReportError(**e) for e in data.get("errors", [])],
        warnings=[ReportError(**w) for w in data.get("warnings", [])],
        notes=list(data.get("notes", [])),
        facts=dict(data.get("facts", {})),
        inventory=data.get("inventory"),
        baseline=data.get("baseline"),
        absent_findings=[_finding_from(f) for f in data.get("absent_findings", [])],
    )


def _finding_from(data: dict[str, Any]) -> Finding:
    fields = {k: v for k, v in data.items() if k in Finding.__dataclass_fields__}
    return Finding(**{**fields, "severity": Severity(data["severity"])})
