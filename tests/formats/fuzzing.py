"""Reports full of hostile strings, and what every output format must do with them.

Shared by the property tests (tests/formats/test_fuzz_formats.py) and the long fuzzing run
(benchmarks/fuzz_formats.py): ``reports()`` is the Hypothesis strategy, ``check_format(name, report)``
renders one format and raises ``FormatProblem`` (or whatever the format raised) when it misbehaves.

The hostile strings mix arbitrary text (lone surrogates and control characters included) with
fragments chosen to attack each channel: workflow commands (``::error``, ``::stop-commands``,
``##[``), line breaks of every kind, terminal escape sequences, bidi overrides, Markdown and HTML
syntax, XML-illegal characters, undecodable bytes (``\\udcff``), escape look-alikes (``\\xff``), and
now and then a very long string.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from functools import cache
from html.parser import HTMLParser
from typing import Any

import jsonschema
from hypothesis import strategies as st

from imagelint.formats import RenderOptions, get_formatter
from imagelint.report import Finding, Outcome, Report, ReportError, RuleResult, Verdict
from imagelint.report.schema import report_schema
from imagelint.rulepacks import Severity
from tests.support import REPO

FORMAT_NAMES = ("text", "json", "sarif", "junit", "github", "markdown", "html")
SARIF_SCHEMA = REPO / "tests" / "formats" / "sarif-schema-2.1.0.json"

FRAGMENTS = [
    "::",
    "::error file=app.py,line=3::Injected",
    "::stop-commands::abc123",
    "::add-mask::x",
    "::set-output name=verdict::pass",
    "  ::warning::indented",
    "\u200b::error::zero-width",
    "##[error]boom",
    "##[stop-commands]tok",
    "#\u200b#[error]",
    "\n",
    "\r",
    "\r\n",
    "\x0b",
    "\x0c",
    "\x85",
    "\u2028",
    "\u2029",
    "\x1b[2J",
    "\x1b]0;title\x07",
    "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\",
    "\x9b31m",
    "\x7f",
    "\x00",
    "\t",
    "\u202e",
    "\u2066",
    "\u200f",
    "\ufeff",
    "\ufe0f",
    "\ufffe",
    "\uffff",
    "\U000e0041",
    "\udcff",
    "\udc80",
    "\ud800",
    "\udfff",
    "\\",
    "\\xff",
    "\\\\",
    "\\u202e",
    "%",
    "%0A",
    "%25",
    ":",
    ",",
    "=",
    "|",
    "<img src=x onerror=alert(1)>",
    "<script>",
    "</code>",
    "<details>",
    "]]>",
    "<!--",
    "&amp;",
    "&#124;",
    "[x](https://evil.example)",
    "![i](https://evil.example/x.png)",
    "<https://evil.example>",
    "https://evil.example",
    "www.evil.example",
    "```",
    "~~~",
    "`",
    "*",
    "_",
    "~~",
    "$x$",
    "@user",
    "#1",
    "- ",
    "1. ",
    "> ",
    "# ",
    "    ",
    "---",
    "ghadelimiter_",
    "<<EOF",
    '"',
    "'",
    "[bold red]",
    "[/]",
    "[link=https://evil.example]",
    "é",
    "日本",
    "😀",
    "\u0301",
    "/etc/bad\udcffname",
    "/root/.ssh/authorized_keys\n::error file=app.py,line=3::Injected\n::stop-commands::abc123\n",
]

_any_char = st.characters(exclude_categories=())  # every code point, lone surrogates included
_piece = st.one_of(
    st.sampled_from(FRAGMENTS),
    st.text(_any_char, max_size=12),
    st.text(st.characters(max_codepoint=0x9F, exclude_categories=()), max_size=6),
)


@st.composite
def _huge(draw: st.DrawFn) -> str:
    return draw(st.sampled_from(FRAGMENTS)) * draw(st.integers(100, 1500))


_mixed = st.lists(_piece, max_size=6).map("".join)
# now and then (about one string in 25) a long one: rendering must not choke on it either
hostile_text = st.sampled_from(range(25)).flatmap(lambda n: _huge() if n == 24 else _mixed)
short_text = st.lists(_piece, max_size=3).map("".join)
optional_text = st.none() | hostile_text

_json_scalar = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | hostile_text
evidence = st.dictionaries(
    short_text,
    _json_scalar | st.lists(_json_scalar, max_size=3) | st.dictionaries(short_text, _json_scalar, max_size=2),
    max_size=3,
)
waivers = st.fixed_dictionaries(
    {"rule": short_text, "reason": hostile_text, "source": short_text},
    optional={"owner": st.none() | short_text, "path": st.none() | short_text, "expires": st.none()},
)
_severities = st.sampled_from(list(Severity))


@st.composite
def findings(draw: st.DrawFn, rule_ids: list[str]) -> Finding:
    waiver = draw(st.none() | waivers)
    return Finding(
        rule_id=draw(st.sampled_from(rule_ids)),
        rule_name=draw(short_text),
        severity=draw(_severities),
        message=draw(hostile_text),
        subject=draw(hostile_text),
        remediation=draw(hostile_text),
        path=draw(optional_text),
        line=draw(st.none() | st.integers(0, 10**9)),
        unit=draw(st.none() | short_text),
        evidence=draw(evidence),
        waiver=waiver,
        failing=waiver is None and draw(st.booleans()),
    )


@st.composite
def rule_results(draw: st.DrawFn, rule_id: str) -> RuleResult:
    return RuleResult(
        rule_id=rule_id,
        name=draw(short_text),
        title=draw(short_text),
        severity=draw(_severities),
        outcome=draw(st.sampled_from(list(Outcome))),
        pack=draw(short_text),
        reason=draw(hostile_text),
        findings=draw(st.integers(0, 50)),
        omitted=draw(st.integers(0, 5)),
        duration_ms=draw(st.floats(0, 1e6)),
        description=draw(hostile_text),
        remediation=draw(hostile_text),
        tags=draw(st.lists(short_text, max_size=3)),
        references=draw(st.lists(short_text, max_size=2)),
    )


_errors = st.builds(ReportError, message=hostile_text, rule_id=st.none() | short_text, where=optional_text)
_hex = st.text("0123456789abcdef", min_size=64, max_size=64)


_restarts = st.fixed_dictionaries({"unit": hostile_text, "restarts": st.integers(0, 10**6)})
_soak = st.fixed_dictionaries(
    {
        "samples": st.lists(
            st.fixed_dictionaries(
                {
                    "monotonic": st.floats(0, 1e6),
                    "dying": st.none() | st.integers(0, 10**6),
                    "live": st.integers(0, 9),
                }
            ),
            max_size=80,
        ),
        "restarts": st.fixed_dictionaries({"deltas": st.lists(_restarts, max_size=12)}),
    }
)
# what the pictures read: a soak whose unit names are hostile (a fleet's rows: tests/formats/test_pictures.py)
facts = st.just({}) | st.fixed_dictionaries({"soak": _soak})


@st.composite
def reports(draw: st.DrawFn, max_findings: int = 14) -> Report:
    """A report whose every string may be hostile; numbers and enums are valid (they are ours)."""
    rule_ids = draw(st.lists(short_text, min_size=1, max_size=4, unique=True))
    rules = [draw(rule_results(rid)) for rid in rule_ids]
    return Report(
        tool_version=draw(short_text),
        target={
            "kind": draw(st.sampled_from(["rootfs", "host", "ami", "fleet"])),
            "path": draw(hostile_text),
        },
        scopes=draw(st.lists(st.sampled_from(["image", "host", "soak"]), unique=True)),
        started_at="2024-05-01T12:00:00+00:00",
        duration_s=draw(st.floats(0, 1e5)),
        fail_on=draw(_severities),
        verdict=draw(st.sampled_from(list(Verdict))),
        rule_packs=draw(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "name": short_text,
                        "path": hostile_text,
                        "sha256": _hex,
                        "builtin": st.booleans(),
                        "rules": st.integers(0, 99),
                    }
                ),
                max_size=2,
            )
        ),
        config=draw(st.none() | st.fixed_dictionaries({"path": hostile_text, "sha256": _hex})),
        rules=rules,
        findings=draw(st.lists(findings(rule_ids), max_size=max_findings)),
        errors=draw(st.lists(_errors, max_size=3)),
        warnings=draw(st.lists(_errors, max_size=2)),
        notes=draw(st.lists(hostile_text, max_size=2)),
        facts=draw(facts),
    )


# -- the checks ---------------------------------------------------------------------------------------


class FormatProblem(AssertionError):
    """A format rendered without raising, but its output breaks a rule; ``kind`` names the rule."""

    def __init__(self, fmt: str, kind: str, detail: str = "") -> None:
        super().__init__(f"{fmt}: {kind}" + (f": {detail}" if detail else ""))
        self.signature = f"{fmt}: {kind}"


# what must never reach a terminal raw: C0 but LF, DEL, C1, bidi controls, line/paragraph separators
_RAW_UNSAFE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
_LEADING_COMMAND = re.compile(r"^[\s\u200b-\u200f\u2060-\u206f\ufeff]*::", re.MULTILINE)
COMMAND = re.compile(r"^::(?P<kind>error|warning|notice)(?: (?P<props>[^:]*))?::(?P<data>[^\r\n]*)$")


@cache
def _report_validator() -> jsonschema.protocols.Validator:
    schema = report_schema()
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


@cache
def _markdown() -> Any:
    from markdown_it import MarkdownIt  # CommonMark with GFM tables, raw HTML allowed, as GitHub does

    return MarkdownIt("commonmark").enable("table")


@cache
def sarif_validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SARIF_SCHEMA.read_text())
    return jsonschema.validators.validator_for(schema)(schema)


def _no_command_lines(fmt: str, text: str) -> None:
    for line in re.split(r"\r\n|\r|\n", text):
        if _LEADING_COMMAND.match(line):
            raise FormatProblem(fmt, "line starts a workflow command", repr(line[:80]))
    if "##[" in text:
        raise FormatProblem(fmt, "legacy workflow command ##[ in output")


def _terminal_safe(fmt: str, text: str) -> None:
    found = _RAW_UNSAFE.search(text)
    if found:
        raise FormatProblem(fmt, "raw control character", repr(found.group()))


def expected_annotations(report: Report) -> int:
    """How many command lines the github format must print for ``report`` (independent of it)."""
    kinds = [
        "error" if f.failing else "notice" if f.severity is Severity.INFO else "warning"
        for f in report.findings
        if f.waiver is None
    ]
    kinds += ["error"] * len(report.errors) + ["warning"] * len(report.warnings)
    count = {k: kinds.count(k) for k in ("error", "warning", "notice")}
    overflow = any(n > 10 for n in count.values())
    shown = min(count["error"], 10) + min(count["warning"], 10) + min(count["notice"], 9 if overflow else 10)
    return shown + (1 if overflow else 0)


def _unescape_data(text: str) -> str:
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def _check_github(report: Report, text: str) -> None:
    lines = text.split("\n")
    if lines[-1] != "":
        raise FormatProblem("github", "output does not end with a newline")
    lines = lines[:-1]
    for line in lines:
        match = COMMAND.match(line)
        if not match:
            raise FormatProblem("github", "line is not one of our commands", repr(line[:80]))
        message = _unescape_data(match["data"])
        if _RAW_UNSAFE.search(message.replace("\n", "")) or "\r" in message:
            raise FormatProblem("github", "raw control character in annotation data")
        for item in filter(None, (match["props"] or "").split(",")):
            key, sep, _ = item.partition("=")
            if not sep or key not in ("file", "line", "title"):
                raise FormatProblem("github", "unexpected command property", repr(item[:80]))
    if len(lines) != expected_annotations(report):
        raise FormatProblem("github", "wrong number of command lines", f"{len(lines)}")
    _terminal_safe("github", text)
    if "##[" in text:
        raise FormatProblem("github", "legacy workflow command ##[ in output")


def _check_markdown(text: str, deep: bool) -> None:
    _terminal_safe("markdown", text)
    _check_mermaid(text)
    _no_command_lines("markdown", text)
    block: list[str] = []
    for line in [*text.split("\n"), ""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if len({row.count("|") for row in block}) > 1:
            raise FormatProblem(
                "markdown", "table rows with different numbers of cells", repr(block[-1][:80])
            )
        block = []
    if not deep:
        return
    html = _markdown().render(text)
    tags = set(re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", html))
    allowed = {"h2", "h3", "p", "code", "strong", "table", "thead", "tbody", "tr", "th", "td"}
    allowed |= {"ul", "li", "details", "summary", "pre"}  # pre: the Mermaid charts' code blocks
    if tags - allowed:
        raise FormatProblem("markdown", "unexpected element", ",".join(sorted(tags - allowed)))
    if html.count("<strong>") != 1:
        raise FormatProblem("markdown", "injected emphasis")


_MERMAID_LABEL = re.compile(r'"(?:[A-Za-z0-9 .,/_+-]|#\d+;)*"')
_MERMAID_SHAPES = [
    "xychart-beta",
    "    title L",
    r"    x-axis (?:L -?[\d.]+ --> -?[\d.]+|\[(?:L(?:, L)*)?\])",
    r"    y-axis L(?: -?[\d.]+ --> -?[\d.]+)?",
    r"    (?:line|bar) \[-?[\d.]+(?:, -?[\d.]+)*\]",
    # the front matter: our fixed configuration
    "---|config:|  xyChart:|    width: 900|    xAxis:|      labelFontSize: 12|  themeVariables:|    xyChart:",
    '      plotColorPalette: "#cf222e"',
]
_MERMAID_LINE = re.compile("|".join(_MERMAID_SHAPES))


def _check_mermaid(text: str) -> None:
    """Every line of every Mermaid block is one of ours, its labels made of safe characters and codes."""
    for block in re.findall(r"^```mermaid\n(.*?)^```$", text, re.MULTILINE | re.DOTALL):
        for line in block.splitlines():
            if not _MERMAID_LINE.fullmatch(_MERMAID_LABEL.sub("L", line)):
                raise FormatProblem("markdown", "unexpected Mermaid line", repr(line[:80]))


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attributes: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes |= {name for name, _ in attrs}


_HTML_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "code", "span", "strong"}
_HTML_TAGS |= {"table", "tr", "th", "td", "ul", "li", "svg", "rect", "text", "polyline"}


def _check_html(text: str) -> None:
    _terminal_safe("html", text)
    _no_command_lines("html", text)
    parser = _Tags()
    parser.feed(text)
    parser.close()
    if parser.tags - _HTML_TAGS:
        raise FormatProblem("html", "unexpected element", ",".join(sorted(parser.tags - _HTML_TAGS)))
    if any(name.startswith("on") or name in ("src", "href") for name in parser.attributes):
        raise FormatProblem("html", "unexpected attribute", ",".join(sorted(parser.attributes)))


def _check_json(text: str, report: Report) -> None:
    data = json.loads(text)
    errors = sorted(_report_validator().iter_errors(data), key=lambda e: list(e.path))
    if errors:
        raise FormatProblem("json", "report schema", errors[0].message[:200])
    for finding, written in zip(report.findings, data["findings"], strict=True):
        if written["path"] != finding.path or written["subject"] != finding.subject:
            raise FormatProblem("json", "finding strings differ from the report's")
    _no_command_lines("json", text)
    _terminal_safe("json", text)


def check_format(fmt: str, report: Report, *, deep: bool = False, show_waived: bool = False) -> str:
    """Render ``report`` as ``fmt`` and check the output; returns it. Raises on any problem.

    ``deep`` adds the slow oracles: the SARIF 2.1.0 schema, and Markdown rendered as GitHub would.
    """
    text = get_formatter(fmt).render(report, RenderOptions(show_waived=show_waived))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise FormatProblem(fmt, "output is not encodable as UTF-8") from exc
    if fmt == "json":
        _check_json(text, report)
    elif fmt == "sarif":
        data = json.loads(text)
        if deep:
            errors = list(sarif_validator().iter_errors(data))
            if errors:
                raise FormatProblem("sarif", "SARIF schema", errors[0].message[:200])
        _no_command_lines("sarif", text)
        _terminal_safe("sarif", text)
    elif fmt == "junit":
        ET.fromstring(text.encode("utf-8"))  # expat: well-formed XML 1.0, or ParseError
        _no_command_lines("junit", text)
        _terminal_safe("junit", text)
    elif fmt == "github":
        _check_github(report, text)
    elif fmt == "markdown":
        _check_markdown(text, deep)
    elif fmt == "text":
        _terminal_safe("text", text)
        _no_command_lines("text", text)
    elif fmt == "html":
        _check_html(text)
    return text


def check_all(report: Report, *, deep: bool = False, show_waived: bool = False) -> dict[str, str]:
    """Every format, checked; returns the outputs by format name."""
    return {fmt: check_format(fmt, report, deep=deep, show_waived=show_waived) for fmt in FORMAT_NAMES}
