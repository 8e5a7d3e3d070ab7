"""GitHub Actions: workflow-command annotations (``--format github``), the step summary and outputs.

Annotations: ``::error`` for findings at or above ``fail-on`` and for data that could not be read,
``::warning`` for findings below ``fail-on`` and for read warnings, ``::notice`` for ``info``
findings; waived findings are not annotated (the summary lists them). Most severe first. GitHub shows
at most 10 errors and 10 warnings (and 10 notices) per step, so no more than that are written, and
one notice says how many were left out. Escaping follows the Actions toolkit: in data ``%``, CR and
LF; in properties also ``:`` and ``,``. Before that, every string from the report goes through
``imagelint.report.escape.for_log``: control, bidi and invisible characters become visible escapes,
so a file name can neither end the command line nor drive the log viewer, and it can neither start a
command (``::``) nor hold a legacy one (``##[``, which the runner reads anywhere in a line).

``publish(report, environ)`` runs when imagelint is in GitHub Actions mode (``GITHUB_ACTIONS=true``
or ``--github``, unless ``--no-github``): it appends ``render_markdown`` to ``$GITHUB_STEP_SUMMARY``
(the file kept under GitHub's 1 MiB limit) and appends the outputs ``verdict``, ``failed`` (findings
at or above ``fail-on``), ``findings``, ``exit-code`` and ``report-sha256`` (the SHA-256 of the
JSON report, byte for byte what ``--format json:PATH`` writes) to ``$GITHUB_OUTPUT``, each in the
multi-line-safe ``name<<DELIMITER`` form (a fresh random delimiter that does not occur in the value).
Each file gets one append of text encoded in full beforehand, so a failure leaves no partial entry.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from imagelint import stderr
from imagelint.formats.interface import REPORT, RenderOptions
from imagelint.formats.markdown import render_markdown
from imagelint.formats.presentation import finding_level, location_text, one_line
from imagelint.records import dataclass
from imagelint.report import Report
from imagelint.report.escape import for_log, visible, workflow_data, workflow_property

LIMIT_PER_KIND = 10  # annotations GitHub displays per step, for each of error / warning / notice
SUMMARY_LIMIT = 1024 * 1024  # GitHub refuses a step summary of 1 MiB or more
_KIND = {"error": "error", "warning": "warning", "note": "notice"}
_ORDER = {"error": 0, "warning": 1, "notice": 2}


def escape_data(text: str) -> str:
    """Command data, as the Actions toolkit escapes it (``%``, CR, LF)."""
    return workflow_data(text)


def escape_property(text: str) -> str:
    """A command property, as the Actions toolkit escapes it (also ``:`` and ``,``)."""
    return workflow_property(text)


def _safe(text: str) -> str:
    """Unsafe characters made visible whatever the caller passed (the report's strings are already
    ``for_log``-escaped: this is the second line of defence); our own newlines are kept."""
    return visible(text, keep_newlines=True)


@dataclass(frozen=True)
class Annotation:
    kind: str  # error | warning | notice
    message: str
    title: str = ""
    file: str | None = None
    line: int | None = None
    rank: int = 0  # higher is more severe, within a kind

    def command(self) -> str:
        props = []
        if self.file:
            props.append(f"file={escape_property(_safe(self.file))}")
            if self.line:
                props.append(f"line={int(self.line)}")
        if self.title:
            props.append(f"title={escape_property(_safe(self.title))}")
        joined = " " + ",".join(props) if props else ""
        return f"::{self.kind}{joined}::{escape_data(_safe(self.message))}"


def collect_annotations(report: Report, options: RenderOptions) -> list[Annotation]:
    """Every annotation this report calls for, most severe first (before the display limit)."""
    from imagelint.formats.presentation import anchor_uri

    anchor = anchor_uri(options.sarif_anchor, report) if options.sarif_anchor else None
    if anchor and anchor.startswith("file:"):
        anchor = None
    found: list[Annotation] = []
    for finding in report.active_findings:
        where = location_text(finding)
        # one line each: a newline in the rule's YAML would show as a literal \n (for_log)
        lines = [for_log(one_line(finding.message))]
        if where not in finding.message:
            lines.append(f"In the image: {for_log(where)}")
        if finding.remediation.strip():
            lines.append(f"Remediation: {for_log(one_line(finding.remediation))}")
        found.append(
            Annotation(
                _KIND[finding_level(finding, report.fail_on)],
                "\n".join(lines),
                title=for_log(f"{finding.rule_id} {finding.rule_name} ({finding.severity.value})"),
                file=for_log(anchor) if anchor else None,
                line=1 if anchor else None,
                rank=finding.severity.rank,
            )
        )
    for error in report.errors:
        title = "imagelint: could not read (inconclusive)"
        found.append(Annotation("error", for_log(str(error)), title=title, rank=99))
    for warning in report.warnings:
        found.append(Annotation("warning", for_log(str(warning)), title="imagelint: warning", rank=-1))
    return sorted(found, key=lambda a: (_ORDER[a.kind], -a.rank, a.title))


class GithubFormatter:
    name = "github"
    documents = (REPORT,)

    def render(self, report: Report, options: RenderOptions) -> str:
        every = collect_annotations(report, options)
        shown: list[Annotation] = []
        left_out: dict[str, int] = {}
        overflow = any(sum(a.kind == kind for a in every) > LIMIT_PER_KIND for kind in _ORDER)
        for kind in _ORDER:
            of_kind = [a for a in every if a.kind == kind]
            # one notice is kept for the count of what was left out
            room = LIMIT_PER_KIND - (1 if kind == "notice" and overflow else 0)
            shown += of_kind[:room]
            if len(of_kind) > room:
                left_out[kind] = len(of_kind) - room
        lines = [a.command() for a in shown]
        if left_out:
            counts = ", ".join(f"{n} {kind}(s)" for kind, n in left_out.items())
            message = (
                f"{counts} not annotated: GitHub displays at most {LIMIT_PER_KIND} of each kind per step. "
                "The step summary and the JSON report list every finding."
            )
            lines.append(Annotation("notice", message, title="imagelint: more findings").command())
        return "".join(line + "\n" for line in lines)


def report_sha256(report: Report) -> str:
    """SHA-256 of the JSON report: the same bytes ``--format json:PATH`` writes."""
    from imagelint.formats.json_format import FORMATTER as JSON

    return hashlib.sha256(JSON.render(report, RenderOptions()).encode("utf-8")).hexdigest()


def output_values(report: Report) -> dict[str, str]:
    counts = report.counts()
    return {
        "verdict": report.verdict.value,
        "failed": str(counts["failing"]),
        "findings": str(counts["findings"]),
        "exit-code": str(int(report.verdict.exit_code)),
        "report-sha256": report_sha256(report),
    }


def write_outputs(path: Path, values: Mapping[str, str]) -> None:
    """Append outputs in the ``name<<DELIMITER`` form, safe for any value (multi-line too)."""
    chunks = []
    for name, value in values.items():
        if not name or any(c in name for c in "\r\n=<"):
            raise ValueError(f"not a GitHub output name: {name!r}")
        value = value.replace("\r\n", "\n").replace("\r", "\n")  # the runner splits lines on LF only
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
        while delimiter in value:  # pragma: no cover - a uuid inside a value
            delimiter = f"ghadelimiter_{uuid.uuid4()}"
        chunks.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    _append(path, "".join(chunks))


def _append(path: Path, text: str) -> None:
    """One append of bytes encoded in full first: an encoding error cannot leave half an entry."""
    data = text.encode("utf-8")
    with path.open("ab") as f:
        f.write(data)


def write_step_summary(report: Report, path: Path) -> None:
    """Append the Markdown summary, keeping the whole file under GitHub's 1 MiB limit."""
    existing = path.stat().st_size if path.exists() else 0
    budget = SUMMARY_LIMIT - 1 - existing - 1  # one byte for the separating newline
    if budget <= 0:
        return
    text = render_markdown(report, max_bytes=budget)
    if text:
        _append(path, ("\n" if existing else "") + text)


def publish(report: Report, environ: Mapping[str, str] | None = None) -> None:
    """Write the step summary and the outputs where GitHub Actions says (if it says)."""
    env = os.environ if environ is None else environ

    def summary(path: Path) -> None:
        write_step_summary(report, path)

    def outputs(path: Path) -> None:
        write_outputs(path, output_values(report))

    writers: tuple[tuple[str, Callable[[Path], None]], ...] = (
        ("GITHUB_STEP_SUMMARY", summary),
        ("GITHUB_OUTPUT", outputs),
    )
    for variable, write in writers:
        target = env.get(variable)
        if not target:
            continue
        try:
            write(Path(target))
        except OSError as exc:  # the exit code stays the gate: warn, do not mask the verdict
            stderr.warning(f"{target}: cannot write ${variable}: {exc.strerror}")


FORMATTER = GithubFormatter()
