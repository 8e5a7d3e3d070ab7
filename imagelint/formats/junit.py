"""JUnit XML output (``--format junit``), for CI systems that show test reports.

One ``<testsuite>`` per target, one ``<testcase>`` per rule (``classname`` ``imagelint.PACK``,
``name`` ``ID name``), so every rule shows up whether or not it found anything:

- ``<failure>`` when the rule has findings that fail the gate (at or above ``fail-on``), listing them;
- ``<error>`` when the rule could not be evaluated (the run is inconclusive);
- ``<skipped>`` when every finding was waived, the rule is not applicable to this image, or it was
  not run (out of this run's scope, deselected);
- otherwise it passes; findings below ``fail-on`` are listed in ``<system-out>``.

Errors not tied to a rule become one extra ``imagelint.run`` test case with an ``<error>``.

Every string is passed through ``imagelint.report.escape.for_xml`` (control and invisible characters
as visible escapes, nothing XML 1.0 cannot carry), and no ``##[`` or line-leading ``::`` is left for
a CI log to read as a workflow command when the XML is printed.
"""

from __future__ import annotations

import datetime as dt
import platform
import xml.etree.ElementTree as ET

from imagelint.formats.interface import REPORT, RenderOptions
from imagelint.formats.presentation import location_text
from imagelint.report import Finding, Outcome, Report, RuleResult
from imagelint.report.escape import for_xml, neutralise_commands


def _x(text: object) -> str:
    """One string for the document: ElementTree escapes markup, this the characters (one line)."""
    return for_xml(str(text))


def _finding_line(finding: Finding) -> str:
    line = f"[{finding.severity.value}] {_x(location_text(finding))}: {_x(finding.message)}"
    if finding.waiver:
        line += f" (waived: {_x(finding.waiver.get('reason', ''))})"
    return line


def _testcase(result: RuleResult, findings: list[Finding], report: Report) -> ET.Element:
    case = ET.Element(
        "testcase",
        classname=_x(f"imagelint.{result.pack or 'rules'}"),
        name=_x(f"{result.rule_id} {result.name}"),
        time=f"{result.duration_ms / 1000:.6f}",
    )
    failing = [f for f in findings if f.failing]
    others = [f for f in findings if not f.failing]
    first = failing[0].message if failing else ""
    if result.outcome is Outcome.ERROR:
        reason = _x(result.reason or "could not be evaluated")
        error = ET.SubElement(case, "error", message=reason, type="error")
        error.text = reason
    elif failing:
        failure = ET.SubElement(
            case,
            "failure",
            message=_x(f"{len(failing)} finding(s) at or above fail-on={report.fail_on.value}: {first}"),
            type=_x(max(failing, key=lambda f: f.severity.rank).severity.value),
        )
        lines = [_finding_line(f) for f in failing]
        if result.omitted:
            lines.append(f"{result.omitted} more finding(s) beyond the per-rule cap not listed")
        if result.remediation:
            lines += ["", _x(f"Remediation: {result.remediation}")]
        failure.text = "\n".join(lines)
    elif result.outcome is Outcome.WAIVED:
        reasons = sorted({_x(f.waiver.get("reason", "")) for f in findings if f.waiver})
        ET.SubElement(case, "skipped", message=_x("waived: " + "; ".join(reasons)))
    elif result.outcome is Outcome.NOT_APPLICABLE:
        ET.SubElement(case, "skipped", message=_x(f"not applicable: {result.reason}"))
    elif result.outcome is Outcome.SKIPPED:
        ET.SubElement(case, "skipped", message=_x(f"not run: {result.reason}"))
    if others:
        ET.SubElement(case, "system-out").text = "\n".join(_finding_line(f) for f in others)
    return case


class JunitFormatter:
    name = "junit"
    documents = (REPORT,)

    def render(self, report: Report, options: RenderOptions) -> str:
        by_rule: dict[str, list[Finding]] = {}
        for finding in report.findings:
            by_rule.setdefault(finding.rule_id, []).append(finding)
        cases = [_testcase(r, by_rule.get(r.rule_id, []), report) for r in report.rules]
        loose = [e for e in report.errors if not e.rule_id]
        if loose:
            case = ET.Element("testcase", classname="imagelint.run", name="read the target", time="0")
            error = ET.SubElement(case, "error", message=_x(str(loose[0])), type="inconclusive")
            error.text = "\n".join(_x(e) for e in loose)
            cases.append(case)
        tally = {
            "tests": len(cases),
            "failures": sum(c.find("failure") is not None for c in cases),
            "errors": sum(c.find("error") is not None for c in cases),
            "skipped": sum(c.find("skipped") is not None for c in cases),
        }
        name = f"imagelint {report.target.get('kind', '')} {report.target.get('path', '')}".strip()
        timestamp = dt.datetime.fromisoformat(report.started_at).astimezone(dt.UTC).replace(tzinfo=None)
        suite = ET.Element(
            "testsuite",
            {
                "name": _x(name),
                "hostname": _x(platform.node() or "localhost"),
                "timestamp": timestamp.isoformat(timespec="seconds"),
                "time": f"{report.duration_s:.3f}",
                **{k: str(v) for k, v in tally.items()},
            },
        )
        properties = ET.SubElement(suite, "properties")
        for key, value in (
            ("imagelint.version", report.tool_version),
            ("verdict", report.verdict.value),
            ("exit-code", str(int(report.verdict.exit_code))),
            ("fail-on", report.fail_on.value),
            ("target", str(report.target.get("path", ""))),
        ):
            ET.SubElement(properties, "property", name=key, value=_x(value))
        suite.extend(cases)
        root = ET.Element("testsuites", name="imagelint", time=f"{report.duration_s:.3f}")
        root.attrib.update({k: str(v) for k, v in tally.items()})
        root.append(suite)
        ET.indent(root)
        xml = '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
        return neutralise_commands(xml, colon="&#58;", bracket="&#91;")


FORMATTER = JunitFormatter()
