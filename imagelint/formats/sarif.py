"""SARIF 2.1.0 output (``--format sarif``), shaped for GitHub code scanning.

What goes where:

- ``tool.driver.rules``: every rule that was evaluated (skipped rules are left out), with
  ``shortDescription`` (the title), ``fullDescription`` (the rationale), ``help`` (rationale,
  remediation and references, as text and Markdown), ``defaultConfiguration.level`` and
  ``properties``: ``tags`` (the rule's tags plus ``security`` and ``imagelint``) and
  ``security-severity`` mapped from the severity (see ``SECURITY_SEVERITY``).
- ``results``: one per finding, waived ones included as suppressed (``suppressions`` of kind
  ``external`` with the waiver's reason as justification). ``level`` is ``error`` for a finding at or
  above ``fail-on`` (it fails the gate), ``warning`` below it, ``note`` for ``info``.
- location: code scanning only displays results located in a repository file, and image findings
  live in the image, not the repository. So the physical location is the *anchor* file
  (``--sarif-anchor PATH``: the Packer template or ``.imagelint.yaml``), line 1, as a URI relative to
  ``%SRCROOT%`` (``$GITHUB_WORKSPACE``, else the working directory; an anchor outside it becomes an
  absolute ``file:`` URI, which code scanning cannot place). Without ``--sarif-anchor``, the
  config file is the anchor when one was used and lies under ``%SRCROOT%``; otherwise results carry no
  physical location (valid SARIF, but code scanning will not display them). The in-image path is
  always kept as a logical location (kind ``resource``), in the message, and in ``properties``.
- ``partialFingerprints.primaryLocationLineHash``: a hash of the rule id and the finding's subject
  (its unit or in-image path), so the same fault on the next image is the same alert.
- ``baselineState`` (``audit --baseline``): ``new`` or ``unchanged`` on each result; the
  baseline's findings this image lacks follow as results with ``baselineState: absent``,
  ``kind: pass`` and ``level: none``.
- ``invocations[0]``: the exit code, ``executionSuccessful`` (false when the run was inconclusive:
  data could not be read), errors and warnings as ``toolExecutionNotifications``.

Strings from the image are in the report's representation (``imagelint.report.escape``: undecodable
bytes as ``\\xHH``, the exact bytes in ``properties.evidence.*_b64``), so the file is valid UTF-8 JSON.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from imagelint.formats.interface import REPORT, RenderOptions
from imagelint.formats.presentation import (
    anchor_uri,
    finding_level,
    location_text,
    severity_level,
    source_root,
)
from imagelint.report import Finding, Outcome, Report, RuleResult, Verdict
from imagelint.report.escape import json_text
from imagelint.report.fingerprint import fingerprint
from imagelint.rulepacks import Severity

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://imagelint.dev"
SRCROOT = "%SRCROOT%"

# GitHub's bands: > 9.0 critical, 7.0–8.9 high, 4.0–6.9 medium, 0.1–3.9 low.
SECURITY_SEVERITY = {
    Severity.CRITICAL: "9.5",
    Severity.HIGH: "8.0",
    Severity.MEDIUM: "5.5",
    Severity.LOW: "3.0",
    Severity.INFO: "1.0",
}


class SarifFormatter:
    name = "sarif"
    documents = (REPORT,)

    def render(self, report: Report, options: RenderOptions) -> str:
        return json_text(self.document(report, options), indent=2) + "\n"

    def document(self, report: Report, options: RenderOptions) -> dict[str, Any]:
        evaluated = [r for r in report.rules if r.outcome is not Outcome.SKIPPED]
        index = {r.rule_id: i for i, r in enumerate(evaluated)}
        uri = anchor_uri(options.sarif_anchor, report)
        run: dict[str, Any] = {
            "tool": {
                "driver": {
                    "name": "imagelint",
                    "version": report.tool_version,
                    "semanticVersion": report.tool_version,
                    "informationUri": INFORMATION_URI,
                    "rules": [_descriptor(r, report.fail_on) for r in evaluated],
                }
            },
            "invocations": [_invocation(report)],
            "results": [_result(f, report, index, uri) for f in _ordered(report.findings)]
            + [_absent(f, report, index, uri) for f in _ordered(report.absent_findings)],
            "columnKind": "unicodeCodePoints",
            "properties": {
                "target": report.target,
                "verdict": report.verdict.value,
                "failOn": report.fail_on.value,
                "counts": report.counts(),
            },
        }
        if uri is not None and not uri.startswith("file:"):
            run["originalUriBaseIds"] = {SRCROOT: {"uri": source_root().as_uri().rstrip("/") + "/"}}
        return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def _ordered(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (-f.severity.rank, f.rule_id, f.location))


def _descriptor(result: RuleResult, fail_on: Severity) -> dict[str, Any]:
    full = result.description or result.title
    help_text = [full]
    help_md = [full]
    if result.remediation:
        help_text.append(f"Remediation: {result.remediation}")
        help_md.append(f"**Remediation:** {result.remediation}")
    if result.references:
        help_text.append("References: " + " ".join(result.references))
        help_md.append("References:\n" + "\n".join(f"- <{r}>" for r in result.references))
    descriptor: dict[str, Any] = {
        "id": result.rule_id,
        "name": result.name,
        "shortDescription": {"text": result.title or result.name},
        "fullDescription": {"text": full},
        "help": {"text": "\n\n".join(help_text), "markdown": "\n\n".join(help_md)},
        "defaultConfiguration": {"level": severity_level(result.severity, fail_on, result.tags)},
        "properties": {
            "tags": sorted({"security", "imagelint", *result.tags}),
            "security-severity": SECURITY_SEVERITY[result.severity],
            "precision": "high",
            "severity": result.severity.value,
            "pack": result.pack,
            "outcome": result.outcome.value,
        },
    }
    if result.references:
        descriptor["helpUri"] = result.references[0]
    return descriptor


def _result(finding: Finding, report: Report, index: dict[str, int], uri: str | None) -> dict[str, Any]:
    where = location_text(finding)
    text = finding.message if where in finding.message else f"{finding.message} (in the image: {where})"
    p = finding.path or finding.subject
    logical = [{"name": PurePosixPath(p).name or p, "fullyQualifiedName": p, "kind": "resource"}]
    if finding.unit:
        logical.append({"name": finding.unit, "fullyQualifiedName": f"unit:{finding.unit}", "kind": "module"})
    location: dict[str, Any] = {"logicalLocations": logical, "message": {"text": f"in the image: {where}"}}
    if uri is not None:
        artifact: dict[str, Any] = {"uri": uri}
        if not uri.startswith("file:"):
            artifact["uriBaseId"] = SRCROOT
        location["physicalLocation"] = {"artifactLocation": artifact, "region": {"startLine": 1}}
    result: dict[str, Any] = {
        "ruleId": finding.rule_id,
        "level": finding_level(finding, report.fail_on),
        "message": {"text": text},
        "locations": [location],
        "partialFingerprints": {"primaryLocationLineHash": fingerprint(finding)},
        "properties": {
            "severity": finding.severity.value,
            "failing": finding.failing,
            "subject": finding.subject,
            "imagePath": finding.path,
            "imageLine": finding.line,
            "unit": finding.unit,
            "remediation": finding.remediation,
            "evidence": finding.evidence,
        },
    }
    if finding.rule_id in index:
        result["ruleIndex"] = index[finding.rule_id]
    if finding.part_of is not None:  # folded into a failing finding of the rule that combines it
        result["properties"]["partOf"] = finding.part_of
    if finding.baseline_state is not None:
        result["baselineState"] = finding.baseline_state
    if finding.waiver is not None:
        result["suppressions"] = [
            {
                "kind": "external",
                "status": "accepted",
                "justification": str(finding.waiver.get("reason", "")),
                "properties": {k: v for k, v in finding.waiver.items() if k != "reason"},
            }
        ]
    return result


def _absent(finding: Finding, report: Report, index: dict[str, int], uri: str | None) -> dict[str, Any]:
    """A baseline's finding this image no longer has: ``baselineState: absent``, kind ``pass``, level
    ``none`` (resolved; it fails nothing)."""
    result = _result(finding, report, index, uri)
    result.update({"baselineState": "absent", "kind": "pass", "level": "none"})
    result["properties"]["failing"] = False
    return result


def _invocation(report: Report) -> dict[str, Any]:
    notifications = [
        {
            "level": "error",
            "message": {"text": str(error)},
            **({"associatedRule": {"id": error.rule_id}} if error.rule_id else {}),
            **(
                {"locations": [{"logicalLocations": [{"fullyQualifiedName": error.where}]}]}
                if error.where
                else {}
            ),
        }
        for error in report.errors
    ]
    notifications += [{"level": "warning", "message": {"text": str(w)}} for w in report.warnings]
    invocation: dict[str, Any] = {
        "executionSuccessful": report.verdict is not Verdict.INCONCLUSIVE and not report.errors,
        "exitCode": int(report.verdict.exit_code),
        "startTimeUtc": report.started_at.replace("+00:00", "Z"),
    }
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    return invocation


FORMATTER = SarifFormatter()
