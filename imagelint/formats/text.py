"""Human output: one line per finding for logs and pipes, the same lines wrapped on a terminal.

Two layouts of the same lines, chosen by ``RenderOptions.terminal`` (true only when stdout is a
terminal; ``NO_COLOR`` turns the terminal's colour off, never the layout):

**Lines** (pipes, files, CI logs). Nothing is wrapped or truncated, whatever the width, so grep and
editors can use every line::

    imagelint 0.1.0 · rootfs /mnt/image · fail-on medium

    == unit ecs.service
    HIGH IL201 /usr/lib/systemd/system/ecs.service:13: ecs.service is started at boot but ...
      fix IL201: Install what the unit runs, or disable ...

    == IL107 aws-credentials-file: AWS credentials stored in the image
    CRITICAL IL107 /root/.aws/credentials:3: /root/.aws/credentials:3 stores an AWS secret ...
      fix IL107: Remove the file, rotate the key, and use an instance profile.

    FAIL: 12 finding(s) (1 critical, ...) · 11 failing (fail-on=medium) · 2 waived · 0 error(s) · ...

A finding is ``SEVERITY RULE where: message``. Findings are grouped by unit (a ``== unit`` heading per
unit), then the findings tied to no unit by rule (a ``== RULE`` heading per rule). A rule's remediation
is shown once, after the first group it appears in. Then: waived findings (``--show-waived`` only), one
line per rule whose findings the listing cap cut (``RULE: N more finding(s) not listed (K failing)``),
what could not be checked (``ERROR ...``: each rule that could not run with its reason, and every
report error), warnings, notes, after a soak one sparkline per series (``soak chart: dying memory
cgroups ▁▁▂▃▅▇█ ...``, downsampled as :mod:`imagelint.formats.charts` says), and exactly one summary
line (:func:`imagelint.formats.wording.summary_line`): the verdict, the true counts, the rule states
in words that cannot be misread.

**Wrapped** (a terminal): the lines above, word for word, each wrapped at the terminal's width
(``COLUMNS`` when set) between words only: a path or name is never cut, one longer than a row stands
whole on its own row; continuation rows are indented under the text, the summary is broken between
its `` · `` parts, and severities, headings and the verdict are coloured.

Every string from the report is escaped for the terminal and the CI log (``imagelint.report.escape.
for_log``: control, bidi and invisible characters as visible escapes, no raw newline inside a finding,
no line that a GitHub runner would read as a workflow command); wrapping only adds breaks and
indents between words. So an image string can neither break the one-line-per-finding layout nor
start a line; the whole output is checked once more for command lines at the end.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from typing import TYPE_CHECKING

from imagelint.formats.interface import DIFF, REPORT, UNITS, RenderOptions, colour

if TYPE_CHECKING:
    from imagelint.diff.result import DiffResult
    from imagelint.formats.interface import UnitsListing
from imagelint.formats.presentation import one_line
from imagelint.formats.wording import plural, summary_line
from imagelint.report import Finding, Outcome, Report, RuleResult, Verdict
from imagelint.report.escape import for_log, neutralise_commands
from imagelint.rulepacks import Severity


class TextFormatter:
    name = "text"
    documents = (REPORT, DIFF, UNITS)

    def render(self, report: Report, options: RenderOptions) -> str:
        if options.terminal:
            return neutralise_commands(_terminal(report, options))
        return neutralise_commands("".join(line + "\n" for line in _lines(report, options)))

    def render_diff(self, result: DiffResult, options: RenderOptions) -> str:
        """One grep-able line per change (:mod:`imagelint.formats.diff_lines`)."""
        from imagelint.formats.diff_lines import render_text

        return neutralise_commands(render_text(result))

    def render_units(self, listing: UnitsListing, options: RenderOptions) -> str:
        """A table of the units (colour on a terminal), then the problems."""
        from imagelint.formats.units_json import units_document
        from imagelint.formats.units_table import render_text

        document = units_document(listing)
        return neutralise_commands(render_text(document, terminal=options.terminal, color=colour(options)))


# -- the line layout ----------------------------------------------------------------------------------


def _lines(report: Report, options: RenderOptions) -> list[str]:
    out = [_header(report)]
    active = [f for f in report.findings if f.waiver is None]
    remedies = _remediations(report)
    given: set[str] = set()
    for heading, group in _groups(report, active):
        out += ["", heading]
        out += [finding_line(f) for f in group]
        for rule_id in dict.fromkeys(f.rule_id for f in group):
            if rule_id not in given and remedies.get(rule_id):
                given.add(rule_id)
                out.append(f"  fix {for_log(rule_id)}: {remedies[rule_id]}")
    if not active:
        out += ["", "no findings" if not report.findings else "no findings except waived ones"]
    waived = [f for f in report.findings if f.waiver is not None]
    if options.show_waived and waived:
        out += ["", f"== waived: {plural(len(waived), 'finding')} (shown with --show-waived)"]
        out += [waived_line(f) for f in _ordered(waived)]
    tail = _tail(report)
    if tail:
        out += ["", *tail]
    out += ["", summary_line(report)]
    return out


def finding_line(finding: Finding) -> str:
    """``SEVERITY RULE where: message``, one line whatever the strings hold; a finding folded into
    another ends with ``(part of RULE)``."""
    where = for_log(finding.location) or "-"
    line = f"{finding.severity.value.upper()} {for_log(finding.rule_id)} {where}: {for_log(finding.message)}"
    return f"{line} (part of {for_log(finding.part_of)})" if finding.part_of else line


def waived_line(finding: Finding) -> str:
    reason = for_log(str((finding.waiver or {}).get("reason", "")))
    return f"WAIVED {finding_line(finding)} (waiver: {reason})"


def _header(report: Report) -> str:
    target = f"{report.target.get('kind', '')} {report.target.get('path', '')}"
    return f"imagelint {for_log(report.tool_version)} · {for_log(target)} · fail-on {report.fail_on.value}"


def _ordered(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (-f.severity.rank, f.rule_id, f.location))


def _groups(report: Report, findings: list[Finding]) -> list[tuple[str, list[Finding]]]:
    """(heading, findings): one group per unit, most severe first, then one per rule for the rest."""
    by_unit: dict[str, list[Finding]] = {}
    by_rule: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.unit:
            by_unit.setdefault(finding.unit, []).append(finding)
        else:
            by_rule.setdefault(finding.rule_id, []).append(finding)
    titles = {r.rule_id: r.title for r in report.rules}
    groups: list[tuple[tuple[int, str], str, list[Finding]]] = []
    for unit, group in by_unit.items():
        rank = max(f.severity.rank for f in group)
        groups.append(((-rank, unit), f"== unit {for_log(unit)}", _ordered(group)))
    units = len(groups)
    for rule_id, group in by_rule.items():
        rank = max(f.severity.rank for f in group)
        title = titles.get(rule_id) or ""
        name = f"{for_log(rule_id)} {for_log(group[0].rule_name)}" + (f": {for_log(title)}" if title else "")
        groups.append(((-rank, rule_id), f"== {name}", _ordered(group)))
    ordered = sorted(groups[:units], key=lambda g: g[0]) + sorted(groups[units:], key=lambda g: g[0])
    return [(heading, group) for _, heading, group in ordered]


def _remediations(report: Report) -> dict[str, str]:
    """Each rule's remediation on one line (the rule's text, its white space collapsed, escaped)."""
    texts = {r.rule_id: r.remediation for r in report.rules if r.remediation}
    for finding in report.findings:
        texts.setdefault(finding.rule_id, finding.remediation)
    return {rule_id: for_log(one_line(text)) for rule_id, text in texts.items() if text.strip()}


# -- what both layouts end with -----------------------------------------------------------------------


def _tail(report: Report) -> list[str]:
    """Cut listings, what could not be checked, warnings and notes: one line each."""
    out = [omitted_line(r) for r in report.rules if r.omitted]
    problems = problem_lines(report)
    if problems:
        if out:
            out.append("")
        out += ["== could not check everything: the run cannot pass", *problems]
    if report.warnings or report.notes:
        if out:
            out.append("")
        out += [f"warning: {for_log(str(w))}" for w in report.warnings]
        out += [for_log(note) for note in report.notes]
    sparks = spark_lines(report)
    if sparks:
        if out:
            out.append("")
        out += sparks
    return out


def spark_lines(report: Report) -> list[str]:
    """One sparkline per soak series (:mod:`imagelint.formats.charts`); none without a soak.

    Every word is ours (titles, numbers): nothing from the image is printed here.
    """
    from imagelint.formats.charts import number, soak_series, sparkline

    return [
        f"soak chart: {s.title} {sparkline(s.values)} "
        f"{number(min(s.values))}..{number(max(s.values))} {s.unit} "
        f"over {number(s.times[-1])} s; {s.sampling}" + (f"; {s.note}" if s.note else "")
        for s in soak_series(report)
    ]


def omitted_line(result: RuleResult) -> str:
    """``RULE: N more finding(s) not listed (K failing)``: the listing cap cut them, the counts have them."""
    extra = f", {result.omitted_waived} waived" if result.omitted_waived else ""
    return (
        f"{for_log(result.rule_id)}: {result.omitted} more finding(s) not listed "
        f"({result.omitted_failing} failing{extra})"
    )


def problem_lines(report: Report) -> list[str]:
    """One ``ERROR`` line per rule that could not run (with its reason) and per distinct report error.

    A rule that could not run usually has a report error saying the same thing: that error is not
    repeated for it. Several rules meeting the same unreadable file share one line.
    """
    out: list[str] = []
    stated: set[tuple[str, str]] = set()
    for result in report.rules:
        if result.outcome is Outcome.ERROR:
            reason = for_log(result.reason or "no reason given")
            out.append(f"ERROR {for_log(result.rule_id)} could not run: {reason}")
            stated.add((result.rule_id, result.reason))
    merged: dict[tuple[str | None, str], list[str]] = {}
    for error in report.errors:
        text = f"{error.where}: {error.message}" if error.where else error.message
        if error.rule_id and ((error.rule_id, text) in stated or (error.rule_id, error.message) in stated):
            continue
        merged.setdefault((error.where, error.message), []).append(error.rule_id or "")
    for (where, message), ids in merged.items():
        named = ",".join(for_log(i) for i in dict.fromkeys(ids) if i)
        text = for_log(f"{where}: {message}" if where else message)
        out.append(f"ERROR {named} {text}" if named else f"ERROR {text}")
    return out


# -- the terminal layout -------------------------------------------------------------------------------


def _terminal(report: Report, options: RenderOptions) -> str:
    """The line layout, wrapped at the terminal's width between words, never inside one."""
    width = max(_width(), 20)
    styled = colour(options)
    rows: list[str] = []
    lines = _lines(report, options)
    for number, line in enumerate(lines):
        if number == len(lines) - 1:  # the summary: broken between its " · " parts first
            wrapped = wrap_parts(line.split(" · "), width, " · ", "  ")
        else:
            wrapped = wrap_words(line, width, _hanging(line))
        if styled:
            wrapped = [_style(row, first=i == 0, line=line, report=report) for i, row in enumerate(wrapped)]
        rows += wrapped
    return "".join(row + "\n" for row in rows)


def _hanging(line: str) -> str:
    """The indent of a wrapped line's continuation rows: under the text its first row starts."""
    if line.startswith("  fix "):
        return " " * 6
    if line.startswith("== "):
        return " " * 3
    return " " * 4 if line else ""


def wrap_words(line: str, width: int, indent: str) -> list[str]:
    """``line`` in rows of at most ``width`` cells, broken at spaces only; a word longer than a row
    (a long path) stands whole on its own row, which the terminal then folds: never cut by us."""
    body = line.lstrip(" ")
    return wrap_parts(body.split(" "), width, " ", indent, lead=line[: len(line) - len(body)])


def wrap_parts(parts: list[str], width: int, joiner: str, indent: str, lead: str = "") -> list[str]:
    """Pack ``parts`` joined by ``joiner`` into rows of ``width`` cells after ``lead``, continuation
    rows after ``indent``; a part too long for a row is wrapped between its words."""
    from rich.cells import cell_len

    rows: list[str] = []
    row, empty = lead, True
    for part in parts:
        candidate = row + part if empty else row + joiner + part
        if empty or cell_len(candidate) <= width:
            row, empty = candidate, False
        else:
            rows.append(row)
            row = indent + part
        if joiner != " " and cell_len(row) > width:
            *done, row = wrap_words(row, width, indent)
            rows += done
    rows.append(row)
    return rows


_SEVERITY_STYLE = {  # SGR codes: bold white on red, bold red, yellow, cyan, dim
    Severity.CRITICAL: "1;37;41",
    Severity.HIGH: "1;31",
    Severity.MEDIUM: "33",
    Severity.LOW: "36",
    Severity.INFO: "2",
}
_WORD_STYLE = {
    **{severity.value.upper(): code for severity, code in _SEVERITY_STYLE.items()},
    "ERROR": "1;33",
    "WAIVED": "2",
    "warning:": "33",
}
_VERDICT_STYLE = {Verdict.PASS: "1;32", Verdict.FAIL: "1;31", Verdict.INCONCLUSIVE: "1;33"}


def _style(row: str, *, first: bool, line: str, report: Report) -> str:
    """Colour for a terminal: the severity word, headings, ``fix`` labels and the verdict; the words
    are the plain layout's (colour never changes the text)."""
    if line.startswith("== "):
        return f"\x1b[1m{row}\x1b[0m"
    if not first:
        return row
    if row.startswith("  fix "):
        label, colon, text = row.partition(":")
        return f"\x1b[2m{label}{colon}\x1b[0m{text}"
    word, _, rest = row.partition(" ")
    code = _WORD_STYLE.get(word)
    if word == f"{report.verdict.value.upper()}:" and line.startswith(word):
        code = _VERDICT_STYLE[report.verdict]
    return f"\x1b[{code}m{word}\x1b[0m {rest}" if code else row


def _width() -> int:
    """The terminal's width: ``COLUMNS`` when set, else the terminal's size (rich's rule too)."""
    return shutil.get_terminal_size(fallback=(80, 24)).columns


FORMATTER = TextFormatter()
