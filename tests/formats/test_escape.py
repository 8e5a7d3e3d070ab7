"""imagelint.report.escape: the lossless representation, and each channel's escaper, on their own."""

from __future__ import annotations

import base64
import json
import sys
import unicodedata
import xml.etree.ElementTree as ET
from dataclasses import asdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from imagelint.report import Finding, ReportError
from imagelint.report.escape import (
    clean_tree,
    escape_text,
    for_log,
    for_markdown,
    for_xml,
    has_surrogates,
    json_text,
    neutralise_commands,
    raw_bytes,
    unescape_text,
    visible,
)
from imagelint.rulepacks import Severity
from tests.formats.fuzzing import hostile_text

UNSAFE_FOR_TERMINAL = (
    [chr(c) for c in range(0x20) if c != 0x0A]
    + [chr(c) for c in range(0x7F, 0xA0)]
    + ["\u2028", "\u2029", "\ud800", "\udcff"]
    + [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
)

_UNSAFE_SET = frozenset(UNSAFE_FOR_TERMINAL)


def _finding(**kw: object) -> Finding:
    base: dict[str, object] = {
        "rule_id": "IL109",
        "rule_name": "world-writable-system-path",
        "severity": Severity.HIGH,
        "message": "m",
        "subject": "s",
        "remediation": "r",
    }
    return Finding(**{**base, **kw})  # type: ignore[arg-type]


# -- the representation -------------------------------------------------------------------------------


def test_valid_strings_are_kept_exactly() -> None:
    for text in ["/etc/passwd", "dev-disk-by\\x2duuid.device", "C:\\temp", "日本 😀", "a\nb\x1b[2J"]:
        assert escape_text(text) is text


def test_an_undecodable_byte_becomes_visible_and_the_bytes_are_kept() -> None:
    raw = b"/etc/bad\xffname\\x41"
    name = raw.decode("utf-8", "surrogateescape")
    finding = _finding(path=name, subject=name, message=f"{name} is world-writable", evidence={"x": name})
    assert finding.path == finding.subject == "/etc/bad\\xffname\\\\x41"  # the literal backslash doubled
    assert finding.message == "/etc/bad\\xffname\\\\x41 is world-writable"
    for key in ("path_b64", "subject_b64", "x_b64"):
        assert base64.b64decode(finding.evidence[key]) == raw
    assert base64.b64decode(finding.evidence["message_b64"]) == raw + b" is world-writable"
    assert unescape_text(finding.path) == raw
    assert finding.evidence["x"] == finding.path and "rule_id_b64" not in finding.evidence
    json.dumps(asdict(finding), ensure_ascii=False).encode("utf-8")  # encodable as UTF-8


def test_evidence_lists_and_nested_mappings_keep_their_bytes() -> None:
    bad = b"\xfe\xff".decode("utf-8", "surrogateescape")
    finding = _finding(evidence={"dropins": ["/ok.conf", f"/x{bad}.conf"], "n": 3, "more": {"k": bad}})
    assert finding.evidence["dropins"] == ["/ok.conf", "/x\\xfe\\xff.conf"]
    assert finding.evidence["dropins_b64"][0] is None
    assert base64.b64decode(finding.evidence["dropins_b64"][1]) == b"/x\xfe\xff.conf"
    assert finding.evidence["more"] == {"k": "\\xfe\\xff", "k_b64": base64.b64encode(b"\xfe\xff").decode()}
    assert finding.evidence["n"] == 3


def test_reading_a_json_report_back_changes_nothing() -> None:
    """imagelint.report.merge rebuilds findings from instances' JSON reports: normalising is idempotent."""
    name = b"/etc/\xff\\x2d".decode("utf-8", "surrogateescape")
    first = _finding(path=name, subject=name, unit="a\\x2db.service", evidence={"e": name})
    again = Finding(**{**json.loads(json.dumps(asdict(first))), "severity": Severity.HIGH})
    assert asdict(again) == asdict(first)


def test_report_errors_are_encodable() -> None:
    error = ReportError("is a FIFO \udcff", rule_id="IL104", where="/root/.ssh/\udc80x")
    assert str(error) == "IL104: /root/.ssh/\\x80x: is a FIFO \\xff"


@settings(max_examples=1500, derandomize=True, deadline=None)
@given(hostile_text)
def test_representation_properties(text: str) -> None:
    escaped = escape_text(text)
    escaped.encode("utf-8")
    assert escape_text(escaped) == escaped
    if has_surrogates(text):
        assert unescape_text(escaped) == raw_bytes(text)
    else:
        assert escaped == text
    assert json.loads(json_text({"k": [text]})) == {"k": [escaped]}


# -- the channels -------------------------------------------------------------------------------------


def test_visible_covers_every_control_format_and_separator_character() -> None:
    for char in UNSAFE_FOR_TERMINAL:
        shown = visible(char)
        assert shown.startswith("\\") and shown.isascii() and shown.isprintable(), repr(char)
    assert visible("a\tb\nc\rd\x1b") == "a\\tb\\nc\\rd\\x1b"
    assert visible("\udcff\u202e\U000e0041") == "\\xff\\u202e\\U000e0041"


def test_log_strings_cannot_start_or_hold_a_workflow_command() -> None:
    assert for_log("::error::x") == "\\x3a:error::x"
    assert for_log("  ::error::x") == "  \\x3a:error::x"
    assert for_log("\u200b::error::x") == "\\u200b::error::x"  # the escape is the line's start now
    assert for_log("a\n::stop-commands::t") == "a\\n::stop-commands::t"
    assert for_log("see ##[error]boom") == "see ##\\x5berror]boom"
    assert for_log("#\u200d#[error]") == "#\\u200d#[error]"
    assert for_log("ipv6 [::1]:22, a::b") == "ipv6 [::1]:22, a::b"  # only a line's start matters


def test_neutralise_commands_reads_lines_as_the_runner_does() -> None:
    text = "ok\n::error::a\rb\r ::warning::c\n\u3000::notice::d\n\u200b::error::e\nx ##[error]f\n#\u00ad#[x]"
    assert neutralise_commands(text) == (
        "ok\n\\x3a:error::a\rb\r \\x3a:warning::c\n\u3000\\x3a:notice::d\n\u200b\\x3a:error::e\n"
        "x ##\\x5berror]f\n#\u00ad#\\x5bx]"
    )
    assert neutralise_commands('  "k": "##[x"', bracket="\\u005b") == '  "k": "##\\u005bx"'


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=":: \t\r\n\u200b\u00ad\u3000a#[", max_size=40))
def test_no_line_of_neutralised_text_is_a_command(text: str) -> None:
    """Whatever the colons, ignorable characters and line breaks around them (neutralise_commands
    looks for two colons before it reads the text line by line), no line the runner reads starts
    a command, and a text without one is returned as it is."""
    out = neutralise_commands(text)
    ignorable = "\u200b\u00ad"
    for line in out.replace("\r", "\n").split("\n"):
        head = line.lstrip(" \t\u3000" + ignorable)
        assert not (head.startswith(":") and head[1:].lstrip(ignorable).startswith(":")), (text, out)
    if "\\x3a" not in out and "\\x5b" not in out:
        assert out == text


def test_markdown_strings_are_inert() -> None:
    from markdown_it import MarkdownIt

    hostile = "[x](https://e.example) ![i](https://e.example/i.png) <img src=x> `c` *e* _u_ ~~s~~ | $m$ @u"
    hostile += " www.e.example https://e.example"
    html = MarkdownIt("commonmark").enable("table").render(f"| a |\n|---|\n| {for_markdown(hostile)} |\n")
    assert "<a" not in html and "<img" not in html and "<em>" not in html and "<code>" not in html
    assert html.count("<td>") == 1
    for block in ["# h", "- l", "1. l", "> q", "```", "    code", "---", "+ l", "<div>"]:
        rendered = MarkdownIt("commonmark").render(f"- {for_markdown(block)}\n")
        assert rendered.count("<") == 4, (block, rendered)  # <ul><li> … </li></ul> and nothing else
    assert for_markdown("a\nb") == "a&#92;nb"


def test_an_underscore_inside_a_word_stays_and_stays_inert() -> None:
    from markdown_it import MarkdownIt

    text = "/etc/ssh/ssh_host_ed25519_key _u_ a__b__ c_ _d x_y_z"
    md = for_markdown(text)
    assert "ssh_host_ed25519_key" in md and "x_y_z" in md and "&#95;u&#95;" in md
    for markup in (f"| a |\n|---|\n| {md} |\n", f"- {md}\n", f"{md}\n"):
        html = MarkdownIt("commonmark").enable("table").render(markup)
        assert "<em>" not in html and "<strong>" not in html, html


def _xml_round_trip(text: str) -> None:
    element = ET.Element("a", b=for_xml(text))
    element.text = for_xml(text)
    parsed = ET.fromstring(ET.tostring(element, encoding="utf-8"))  # expat: XML 1.0 or ParseError
    assert parsed.get("b") == (parsed.text or "") == for_xml(text)


def test_xml_strings_are_well_formed() -> None:
    _xml_round_trip("".join(chr(c) for c in range(0x20)) + "\ufffe\uffff\udcff\x85 ]]> <&>'\"")


def test_json_text_escapes_what_a_terminal_acts_on_and_keeps_the_value() -> None:
    value = {"p": "a\x85b\u202ec\U000e0041d\x7f ##[error]x", "q": "\udcff"}
    text = json_text(value)
    assert "\x85" not in text and "\u202e" not in text and "##[" not in text
    assert json.loads(text) == clean_tree(value) == {"p": value["p"], "q": "\\xff"}


@pytest.mark.parametrize("indent", [2, None])
def test_json_text_escapes_the_raw_characters_of_every_key_and_value(indent: int | None) -> None:
    # a string is searched only when it holds DEL or a character beyond ASCII: DEL alone is ASCII
    value = {"plain": ["x"] * 3, "del": "a\x7fb", "sep": ["c\u2028d", "e"], "k\u200bey": "\x9f\u200b"}
    text = json_text(value, indent=indent)
    assert not any(c in text for c in "\x7f\u2028\x9f\u200b"), text
    assert "\\u007f" in text and "\\u2028" in text and "\\u200b" in text and json.loads(text) == value


@settings(max_examples=1500, derandomize=True, deadline=None)
@given(hostile_text)
def test_channel_escapers_on_hostile_strings(text: str) -> None:
    log = for_log(text)
    assert "\n" not in log and "\r" not in log and "##[" not in log
    assert not any(c in _UNSAFE_SET for c in log)
    assert neutralise_commands(log) == log
    md = for_markdown(text)
    assert not any(c in md for c in "<>[]()`*|\\\n")
    assert all(md[i - 1].isalnum() and md[i + 1].isalnum() for i, c in enumerate(md) if c == "_")
    _xml_round_trip(text)
