"""Human output: findings grouped by severity in a table, then a one-line summary.

Colour only when writing to a terminal, and never when NO_COLOR is set (rich honours it).

Every string from the report is escaped for the terminal and the CI log (``imagelint.report.escape.
for_log``: control, bidi and invisible characters as visible escapes, no raw newline inside a finding,
no line that a GitHub runner would read as a workflow command) and for rich's markup. Lines other
than the table are not wrapped, so an image string never starts a line; the whole output is checked
once more for command lines at the end.
"""

from __future__ import annotations

import io
import os

from imagelint.formats.interface import RenderOptions
from imagelint.report import Outcome, Report, Verdict
from imagelint.report.escape import for_log, neutralise_commands
from imagelint.rulepacks import Severity

_STYLE = {
    Severity.CRITICAL: "bold white on red",
    Severity.HIGH: "bold red",
    Severity.MEDIUM: "yellow",
    Severity.LOW: "cyan",
    Severity.INFO: "dim",
}
_VERDICT_STYLE = {Verdict.PASS: "bold green", Verdict.FAIL: "bold red", Verdict.INCONCLUSIVE: "bold yellow"}


class TextFormatter:
    name = "text"

    def render(self, report: Report, options: RenderOptions) -> str:
        from rich.console import Console
        from rich.table import Table

        buffer = io.StringIO()
        use_color = options.color and "NO_COLOR" not in os.environ
        console = Console(
            file=buffer, force_terminal=use_color, no_color=not use_color, width=_width(), highlight=False
        )
        target = f"{report.target.get('kind', '')} {report.target.get('path', '')}"
        console.print(f"imagelint {_escape(report.tool_version)} · {_escape(target)}", soft_wrap=True)
        shown = [f for f in report.findings if options.show_waived or f.waiver is None]
        shown.sort(key=lambda f: (-f.severity.rank, f.rule_id, f.location))
        if shown:
            table = Table(show_lines=False, expand=False, pad_edge=False)
            table.add_column("severity", no_wrap=True)
            table.add_column("rule", no_wrap=True)
            table.add_column("where", overflow="fold")
            table.add_column("finding", overflow="fold")
            for finding in shown:
                severity = f"[{_STYLE[finding.severity]}]{finding.severity.value}[/]"
                message = _escape(finding.message) + (
                    f"\n[dim]waived: {_escape(finding.waiver.get('reason', ''))}[/]" if finding.waiver else ""
                )
                table.add_row(severity, _escape(finding.rule_id), _escape(finding.location), message)
            console.print(table)
        for line in _merged_errors(report):
            console.print(f"[bold yellow]error[/] {_escape(line)}", soft_wrap=True)
        for warning in report.warnings:
            console.print(f"[yellow]warning[/] {_escape(str(warning))}", soft_wrap=True)
        for result in report.rules:
            if result.omitted:
                console.print(
                    f"[dim]{_escape(result.rule_id)}: {result.omitted} more findings not listed[/]",
                    soft_wrap=True,
                )
        for note in report.notes:
            console.print(f"[dim]{_escape(note)}[/]", soft_wrap=True)
        console.print(_summary(report), style=_VERDICT_STYLE[report.verdict])
        return neutralise_commands(buffer.getvalue())


def _merged_errors(report: Report) -> list[str]:
    """One line per distinct problem; several rules meeting the same unreadable file share it."""
    rules: dict[tuple[str | None, str], list[str]] = {}
    for error in report.errors:
        rules.setdefault((error.where, error.message), []).append(error.rule_id or "")
    lines = []
    for (where, message), ids in rules.items():
        named = ", ".join(i for i in dict.fromkeys(ids) if i)
        lines.append((f"{named}: " if named else "") + (f"{where}: {message}" if where else message))
    return lines


def _summary(report: Report) -> str:
    counts = report.counts()
    rules = counts["rules"]
    severities = ", ".join(f"{n} {s}" for s, n in reversed(counts["by_severity"].items()) if n)
    parts = [
        f"{counts['findings']} finding(s)" + (f" ({severities})" if severities else ""),
        f"{counts['failing']} at or above fail-on={report.fail_on.value}",
        f"{counts['waived']} waived",
        f"rules: {rules[Outcome.PASS]} passed, {rules[Outcome.FAIL]} failed, "
        f"{rules[Outcome.NOT_APPLICABLE]} not applicable, {rules[Outcome.ERROR]} errors",
    ]
    return f"{report.verdict.value.upper()}: " + " · ".join(parts)


def _escape(text: object) -> str:
    """A string from the report, for the terminal and the log, then for rich's markup."""
    from rich.markup import escape

    return escape(for_log(str(text)))


def _width() -> int:
    try:
        return max(80, os.get_terminal_size().columns)
    except OSError:
        return 120


FORMATTER = TextFormatter()
