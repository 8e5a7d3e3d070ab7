"""Markdown output (``--format markdown``), also what the GitHub step summary shows.

One helper, ``render_markdown(report, max_bytes=...)``, serves both: the format renders it whole,
and ``imagelint.formats.github.write_step_summary`` renders it within the room left under GitHub's
1 MiB step-summary limit. When the budget is short, findings are dropped from the end of the table
(the least severe go first) and a line says how many are not shown; the JSON report has them all.

Every string from the report goes through ``imagelint.report.escape.for_markdown``: Markdown and
HTML metacharacters become numeric character references, control and invisible characters (newlines
too) visible escapes, so an image path or message can never break the table, open a link, an
image, raw HTML, emphasis or a code span, or start a list, heading or fence in a list item.

A soak report adds its pictures (``### Soak``: Mermaid ``xychart-beta`` charts, which GitHub renders
natively, of dying and live memcgs, the busiest CPU's kernel share, the memory.stat walk and the
units that restarted most) and a fleet report a row per host with a chart of its outliers
(:mod:`imagelint.formats.charts`); they go with the errors and warnings when the budget is short.

Rule states are named as in the text format (``imagelint.formats.wording``): "3 rules with findings
below fail-on" rather than "3 failed", which a passing run made hard to read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagelint.formats.interface import DIFF, REPORT, RenderOptions

if TYPE_CHECKING:
    from imagelint.diff.result import DiffResult
from imagelint.formats.presentation import cell, code, gate_words, inline, prose
from imagelint.formats.wording import failing_rules, folded_rules, rule_state_words, rule_states
from imagelint.report import Finding, Outcome, Report, Verdict
from imagelint.report.escape import neutralise_commands

_VERDICT = {Verdict.PASS: "✅ PASS", Verdict.FAIL: "❌ FAIL", Verdict.INCONCLUSIVE: "⚠️ INCONCLUSIVE"}
_RULE6 = "|---|---|---|---|---|---|"
_SEVERITY_ICON = {"critical": "🟥", "high": "🔴", "medium": "🟠", "low": "🟡", "info": "⚪"}


def _finding_row(finding: Finding, waived: bool = False) -> str:
    severity = f"{_SEVERITY_ICON[finding.severity.value]} {finding.severity.value}"
    where = finding.location + (f" (unit {finding.unit})" if finding.unit else "")
    last = cell(finding.waiver.get("reason", "")) if waived and finding.waiver else prose(finding.remediation)
    gate = cell(gate_words(finding))
    return (
        f"| {severity} | {code(finding.rule_id)} {cell(finding.rule_name)} | {code(where)} "
        f"| {cell(finding.message)} | {gate if not waived else 'waived'} | {last} |"
    )


def render_markdown(report: Report, max_bytes: int | None = None) -> str:
    """The report as Markdown; at most ``max_bytes`` UTF-8 bytes when given (rows are dropped to fit)."""
    counts = report.counts()
    failing, folded = failing_rules(report), folded_rules(report)
    head = [
        f"## imagelint: {_VERDICT[report.verdict]}",
        "",
        f"{code(report.target.get('kind', ''))} {code(report.target.get('path', ''))} · "
        f"imagelint {inline(report.tool_version)} · fail-on **{cell(report.fail_on.value)}**",
        "",
        "| failing | findings | waived | errors | rules |",
        "|---:|---:|---:|---:|---|",
        f"| {counts['failing']} | {counts['findings']} | {counts['waived']} | {counts['errors']} "
        f"| {', '.join(rule_states(report)) or 'none'} |",  # our words only
        "",
    ]
    active = sorted(report.active_findings, key=lambda f: (not f.failing, -f.severity.rank, f.rule_id))
    waived = [f for f in report.findings if f.waiver is not None]
    table_head = [
        "### Findings",
        "",
        "| severity | rule | in the image | finding | gate | remediation |",
        _RULE6,
    ]
    rows = [_finding_row(f) for f in active]
    tail: list[str] = []
    if report.errors:
        tail += ["", "### Errors (the run is inconclusive)", ""]
        tail += [f"- {cell(e)}" for e in report.errors]
    if report.warnings:
        tail += ["", "### Warnings", ""]
        tail += [f"- {cell(w)}" for w in report.warnings]
    tail += picture_lines(report)
    if waived:
        tail += ["", f"<details><summary>Waived findings ({len(waived)})</summary>", ""]
        tail += ["| severity | rule | in the image | finding | gate | waiver reason |", _RULE6]
        tail += [_finding_row(f, waived=True) for f in waived]
        tail += ["", "</details>"]
    ran = [r for r in report.rules if r.outcome is not Outcome.SKIPPED]
    rules_block = ["", f"<details><summary>Rules evaluated ({len(ran)})</summary>", ""]
    rules_block += ["| rule | severity | state | reason |", "|---|---|---|---|"]
    rules_block += [
        f"| {code(r.rule_id)} {cell(r.name)} | {cell(r.severity.value)} "
        f"| {rule_state_words(r, failing, folded)} | {cell(r.reason)} |"
        for r in ran
    ]
    rules_block += ["", "</details>"]
    omitted = sum(r.omitted for r in report.rules)
    note = ["", f"{omitted} more finding(s) beyond the per-rule cap are counted but not listed."]
    if not omitted:
        note = []

    def assemble(n_rows: int, with_tail: bool, with_rules: bool) -> str:
        parts = list(head)
        if rows:
            parts += table_head + rows[:n_rows]
            if n_rows < len(rows):
                more = len(rows) - n_rows
                parts += ["", f"…and {more} more finding(s) not shown here: see the JSON report."]
        else:
            parts += ["No findings." if not waived else "No findings except waived ones."]
        parts += note
        if with_tail:
            parts += tail
        if with_rules:
            parts += rules_block
        return "\n".join(parts) + "\n"

    text = assemble(len(rows), True, True)
    if max_bytes is None or _size(text) <= max_bytes:
        return text
    for with_tail, with_rules in ((True, False), (False, False)):
        if _size(assemble(0, with_tail, with_rules)) > max_bytes:
            continue
        low, high = 0, len(rows)  # the most rows that fit
        while low < high:
            mid = (low + high + 1) // 2
            if _size(assemble(mid, with_tail, with_rules)) <= max_bytes:
                low = mid
            else:
                high = mid - 1
        return assemble(low, with_tail, with_rules)
    short = f"## imagelint: {_VERDICT[report.verdict]}\n\n(summary too large; see the JSON report)\n"
    return short if _size(short) <= max_bytes else ""


def picture_lines(report: Report) -> list[str]:
    """The soak as Mermaid charts and the fleet as a table with a chart of its outliers; none otherwise."""
    from imagelint.formats import charts

    out: list[str] = []
    series = charts.soak_series(report)
    restarts = charts.restart_bars(report)
    if series or restarts:
        out += ["", "### Soak", ""]
        for one in series:
            out += [*charts.mermaid_line(one), ""]
        if restarts:
            out += [*charts.mermaid_bars(restarts), ""]
        out.pop()
    hosts = charts.fleet_hosts(report)
    if hosts:
        out += ["", f"### Fleet ({len(hosts)} hosts)", ""]
        outliers = charts.fleet_outliers(hosts)
        if outliers:
            out += [*charts.mermaid_bars(outliers), ""]
        out += ["| host | verdict | failing | findings | errors | status |", "|---|---|---:|---:|---:|---|"]
        out += [
            f"| {code(h.instance)} | {cell(h.verdict)} | {h.failing} | {h.findings} | {h.errors} "
            f"| {cell(h.status)} |"
            for h in hosts
        ]
    return out


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


class MarkdownFormatter:
    name = "markdown"
    documents = (REPORT, DIFF)

    def render(self, report: Report, options: RenderOptions) -> str:
        # every string is escaped already; this guards the log if the Markdown is printed in CI
        return neutralise_commands(render_markdown(report), colon="&#58;", bracket="&#91;")

    def render_diff(self, result: DiffResult, options: RenderOptions) -> str:
        """A PR comment or step summary: the verdict and a table of the changes."""
        from imagelint.formats.diff_lines import render_markdown as render_diff_markdown

        return neutralise_commands(render_diff_markdown(result), colon="&#58;", bracket="&#91;")


FORMATTER = MarkdownFormatter()
