"""A baseline: the report of the previous image, to tell new findings from the backlog.

``audit NEW --baseline OLD.json`` marks each finding of NEW by its fingerprint
(:mod:`imagelint.report.fingerprint`: rule id + subject) as SARIF 2.1.0 names the states:
``new`` (OLD lacks it) or ``unchanged`` (OLD has it); OLD's findings that NEW lacks are listed as
``absent``. Waived findings count like any other: a waiver is the config's business, not the
image's. With ``--fail-on-new`` only ``new`` findings can fail the gate; that decision is made in
:func:`imagelint.report.verdict.finding_fails`, nowhere else.

A baseline whose listing of a rule was cut (more than the per-rule cap) cannot say which of that
rule's findings it had beyond the cap: such a finding is ``new`` (the gate errs on failing).
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path
from typing import Any

from imagelint.records import dataclass
from imagelint.report.fingerprint import fingerprint, fingerprint_of
from imagelint.report.model import Finding, report_from_dict
from imagelint.report.reading import read_report_dict

NEW, UNCHANGED, ABSENT = "new", "unchanged", "absent"


@dataclass
class Baseline:
    path: str
    sha256: str
    findings: dict[str, Finding]  # fingerprint -> the baseline's finding
    seen: set[str] = field(default_factory=set)

    def state(self, finding: Finding) -> str:
        key = fingerprint(finding)
        if key in self.findings:
            self.seen.add(key)
            return UNCHANGED
        return NEW

    def absent(self) -> list[Finding]:
        """The baseline's findings no finding of this run matched (call after marking them all)."""
        out = []
        for key, finding in self.findings.items():
            if key not in self.seen:
                finding.baseline_state = ABSENT
                finding.failing = False
                out.append(finding)
        return out

    def summary(self, findings: list[Finding], absent: list[Finding], *, fail_on_new: bool) -> dict[str, Any]:
        states = [f.baseline_state for f in findings]
        return {
            "path": self.path,
            "sha256": self.sha256,
            "fail_on_new": fail_on_new,
            "new": states.count(NEW),
            "unchanged": states.count(UNCHANGED),
            "absent": len(absent),
        }


def load_baseline(path: Path) -> Baseline:
    """The baseline in the JSON report ``path`` (exit 3 naming the file when it cannot be used)."""
    data, sha256 = read_report_dict(path)
    report = report_from_dict(data)
    findings = {fingerprint_of(f.rule_id, f.unit, f.subject, f.path): f for f in report.findings}
    return Baseline(str(path), sha256, findings)
