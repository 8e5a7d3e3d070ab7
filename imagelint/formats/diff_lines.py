"""``imagelint diff`` output for the text and markdown formats (JSON is the result's ``to_dict``).

Text: a header naming both sides, then one line per change, ``ACTION KIND SUBJECT: detail``
(``ACTION KIND [DEVICE] SUBJECT: detail`` in a diff of two AMIs), most severe first, then one
summary line. Markdown: a heading with the verdict, a table of the changes
(at most ``MAX_MARKDOWN_ROWS``; the JSON has them all), for a PR comment or the step summary. Every
string from an image is escaped for its channel (:mod:`imagelint.report.escape`).
"""

from __future__ import annotations

from imagelint.diff.result import DiffResult
from imagelint.formats.presentation import cell, code
from imagelint.report.escape import for_log
from imagelint.report.model import Verdict

MAX_MARKDOWN_ROWS = 500
_ICON = {"fail": "❌ fail", "warn": "⚠️ warn", "allowed": "✅ allowed", "note": "ℹ️ note"}
_VERDICT = {Verdict.PASS: "✅ PASS", Verdict.FAIL: "❌ FAIL", Verdict.INCONCLUSIVE: "⚠️ INCONCLUSIVE"}


def summary_line(result: DiffResult) -> str:
    c = result.counts()
    kinds = ", ".join(f"{k} {n}" for k, n in c["by_kind"].items()) or "no changes"
    return (
        f"result: {result.verdict.value}: {c['fail']} change(s) fail, {c['warn']} warn, "
        f"{c['allowed']} allowed, {c['note']} note(s) ({kinds})"
    )


def _side(label: str, result: DiffResult, which: str) -> str:
    side = result.old if which == "old" else result.new
    extra = "" if side.complete else " [incomplete: a change may be hidden]"
    return f"{label}: {for_log(side.description)} ({side.source}, audit {side.verdict}){extra}"


def render_text(result: DiffResult) -> str:
    lines = ["imagelint diff", _side("old", result, "old"), _side("new", result, "new"), ""]
    for c in result.changes:
        where = "" if c.device is None else f"[{for_log(c.device)}] "
        lines.append(f"{c.action.upper():<7} {c.kind} {where}{for_log(c.subject)}: {for_log(c.detail)}")
    if not result.changes:
        lines.append("no changes")
    lines += ["", summary_line(result)]
    return "\n".join(lines) + "\n"


def render_markdown(result: DiffResult) -> str:
    c = result.counts()
    lines = [
        f"## imagelint diff: {_VERDICT[result.verdict]}",
        "",
        f"old {code(result.old.description)} ({cell(result.old.source)}) → "
        f"new {code(result.new.description)} ({cell(result.new.source)})",
        "",
        f"**{c['fail']}** fail · **{c['warn']}** warn · **{c['allowed']}** allowed · **{c['note']}** note",
        "",
    ]
    for side in (result.old, result.new):
        if not side.complete:
            lines += [f"⚠️ {code(side.description)} could not be read in full: a change may be hidden.", ""]
    if not result.changes:
        return "\n".join([*lines, "No changes."]) + "\n"
    lines += ["| | change | subject | detail |", "|---|---|---|---|"]
    for change in result.changes[:MAX_MARKDOWN_ROWS]:
        subject, detail = code(change.subject), cell(change.detail)
        if change.device is not None:
            subject = f"{code(change.device)} {subject}"
        lines.append(f"| {_ICON[change.action]} | {cell(change.kind)} | {subject} | {detail} |")
    if len(result.changes) > MAX_MARKDOWN_ROWS:
        lines += ["", f"…and {len(result.changes) - MAX_MARKDOWN_ROWS} more change(s): see the JSON output."]
    return "\n".join(lines) + "\n"
