"""Strings from the image, made safe: one lossless representation in the report, one escaper per channel.

The image is the adversary's input (CONTRIBUTING.md: "the image is hostile input"). File names and file
contents reach the report as ``str`` decoded with ``surrogateescape``, so a byte that is not UTF-8 arrives
as a lone surrogate (``b"\\xff"`` → ``"\\udcff"``), which no UTF-8 writer accepts. Two layers deal with that:

**The representation** (``normalise_finding``, ``escape_text``), applied when a ``Finding`` or
``ReportError`` is created. A string that is valid Unicode is kept exactly as it is. A string that
holds lone surrogates is rewritten: a surrogate ``U+DC80``–``U+DCFF`` (an undecodable byte ``HH``)
becomes the text ``\\xHH``, any other lone surrogate becomes ``\\uXXXX``, and every literal backslash
is doubled, so that text decodes back to the exact bytes (``unescape_text``). For a finding, the exact
bytes of every rewritten field are also kept, base64-encoded, in its evidence: ``path_b64``,
``subject_b64``, ``unit_b64``, ``message_b64`` and so on, and for an evidence entry ``K``, ``K_b64``
beside it (for a list, a list of the same length with ``null`` where the item needed no rewriting).
A ``*_b64`` key is therefore also the sign that its field's text is escaped. Valid strings are left
alone, so reading a JSON report back (``imagelint.report.merge``) and normalising again changes nothing.

**The channels.** Every format escapes every string for where it goes:

- ``for_log``: terminals and CI logs (text and github formats). Control characters (C0, DEL, C1),
  format and default-ignorable characters (bidi overrides and isolates, zero-width characters),
  U+2028/U+2029 and lone surrogates become visible escapes (``\\n``, ``\\x1b``, ``\\u202e``), and
  no string can start a workflow command: a leading ``::`` and any ``##[`` are neutralised.
- ``workflow_data`` / ``workflow_property``: the Actions toolkit's escaping of command data
  (``%``, CR, LF) and properties (also ``:`` and ``,``), after ``for_log``.
- ``for_markdown``: visible escapes as for the log, and numeric character references for Markdown
  and HTML metacharacters, so a file name cannot open a link, an image, raw HTML, emphasis, a table
  cell, a code span or a block.
- ``for_xml``: text XML 1.0 can carry (ElementTree escapes markup itself).
- ``json_text``: ``json.dumps`` output with the characters it leaves raw that a terminal would act on
  escaped as ``\\uXXXX`` (same JSON value), after ``clean_tree`` made every string encodable.

``neutralise_commands`` is the last guard on whole outputs: no line of it starts a workflow command
(``::``) and no ``##[`` (which the runner's legacy parser accepts anywhere in a line) survives.
"""

from __future__ import annotations

import base64
import codecs
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from imagelint import lazy

# -- the representation -------------------------------------------------------------------------------

_SURROGATE = lazy.regex(r"[\ud800-\udfff]")
_TO_ESCAPE = lazy.regex(r"[\\\ud800-\udfff]")  # a backslash or a lone surrogate


def has_surrogates(text: str) -> bool:
    """True when ``text`` holds a lone surrogate (an undecodable byte, or worse): it cannot be UTF-8."""
    return not text.isascii() and _SURROGATE().search(text) is not None


def _escape_one(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\\":
        return "\\\\"
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's stand-in for the byte code - 0xDC00
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def escape_text(text: str) -> str:
    """The report's text for ``text``: itself when it is valid Unicode, else escaped (see the module)."""
    if not has_surrogates(text):
        return text
    return _TO_ESCAPE().sub(_escape_one, text)


def _raw_errors(error: UnicodeError) -> tuple[bytes, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    out = bytearray()
    for char in error.object[error.start : error.end]:
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(code - 0xDC00)
        else:  # a lone surrogate that stands for no byte: its (CESU-style) code units
            out += char.encode("utf-8", "surrogatepass")
    return bytes(out), error.end


codecs.register_error("imagelint-raw", _raw_errors)


def raw_bytes(text: str) -> bytes:
    """The bytes a string from the image stands for: UTF-8, with ``surrogateescape``'s bytes restored."""
    return text.encode("utf-8", "imagelint-raw")


def b64(text: str) -> str:
    return base64.b64encode(raw_bytes(text)).decode("ascii")


_UNESCAPE = lazy.regex(r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4})")


def unescape_text(text: str) -> bytes:
    """The exact bytes an escaped report string (one with a ``*_b64`` sibling) stands for."""
    out = bytearray()
    pos = 0
    for match in _UNESCAPE().finditer(text):
        out += text[pos : match.start()].encode("utf-8")
        token = match.group(1)
        if token == "\\":
            out += b"\\"
        elif token[0] == "x":
            out.append(int(token[1:], 16))
        else:
            out += chr(int(token[1:], 16)).encode("utf-8", "surrogatepass")
        pos = match.end()
    out += text[pos:].encode("utf-8")
    return bytes(out)


def clean_tree(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, strings, numbers) with every string made encodable.

    No raw bytes are recorded: this is the formats' safety net for report parts that are not findings
    (the target, notes, rule results, facts). A float that is not finite (a rate over no time) has
    no JSON form and becomes ``None``. Unchanged parts are returned as they are.
    """
    if isinstance(value, str):
        return escape_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {clean_tree(k): clean_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_tree(v) for v in value]
    return value


def _normalise_item(value: Any) -> tuple[Any, Any]:
    """(normalised value, its raw-bytes record or None)."""
    if isinstance(value, str):
        if has_surrogates(value):
            return escape_text(value), b64(value)
        return value, None
    if isinstance(value, Mapping):
        return normalise_mapping(value), None
    if isinstance(value, list | tuple):
        items = [_normalise_item(v) for v in value]
        raws = [r for _, r in items]
        return [v for v, _ in items], (raws if any(isinstance(r, str) for r in raws) else None)
    return value, None


def normalise_mapping(data: Mapping[Any, Any]) -> dict[Any, Any]:
    """Evidence made encodable; a rewritten entry ``K`` gets its exact bytes in ``K_b64`` beside it."""
    out: dict[Any, Any] = {}
    raws: dict[Any, Any] = {}
    for key, value in data.items():
        name = escape_text(key) if isinstance(key, str) else key
        out[name], raw = _normalise_item(value)
        if raw is not None:
            raws[f"{name}_b64"] = raw
    out.update(raws)
    return out


FINDING_TEXT_FIELDS = ("rule_id", "rule_name", "message", "subject", "remediation", "path", "unit")


def normalise_finding(finding: Any) -> None:
    """Bring a ``Finding`` to the representation, in place (its ``__post_init__`` calls this)."""
    evidence = normalise_mapping(finding.evidence or {})
    for name in FINDING_TEXT_FIELDS:
        value = getattr(finding, name)
        if isinstance(value, str) and has_surrogates(value):
            setattr(finding, name, escape_text(value))
            evidence[f"{name}_b64"] = b64(value)
    finding.evidence = evidence
    if finding.waiver is not None:
        finding.waiver = clean_tree(finding.waiver)


def normalise_error(error: Any) -> None:
    """Bring a ``ReportError`` to the representation, in place (text only: errors carry no evidence)."""
    for name in ("message", "rule_id", "where"):
        value = getattr(error, name)
        if isinstance(value, str):
            setattr(error, name, escape_text(value))


# -- the channels -------------------------------------------------------------------------------------

# Characters a terminal or a log viewer acts on, or that hide or reorder text: C0, DEL, C1; every
# format character (Cf: bidi embeddings, overrides and isolates, zero-width characters, tags); the
# other default-ignorable code points (variation selectors, Hangul fillers). Regex class syntax.
# (tests/formats check the list against unicodedata's Cf.)
_C0 = r"\x00-\x1f"
_IGNORABLE_NOT_C0 = (
    r"\x7f-\x9f\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    r"\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164"
    r"\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    r"\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
_IGNORABLE = _C0 + _IGNORABLE_NOT_C0
_SEPARATORS = r"\u2028\u2029"
_SURROGATES = r"\ud800-\udfff"
UNSAFE_CHARS = _IGNORABLE + _SEPARATORS + _SURROGATES  # what ``visible`` escapes (regex class body)
_UNSAFE = lazy.regex(f"[{UNSAFE_CHARS}]")
_UNSAFE_BUT_NEWLINE = lazy.regex(f"[\\x00-\\x09\\x0b-\\x1f{_IGNORABLE_NOT_C0}{_SEPARATORS}{_SURROGATES}]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible_one(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every unsafe character (see ``UNSAFE_CHARS``) shown as a visible escape."""
    pattern = _UNSAFE_BUT_NEWLINE() if keep_newlines else _UNSAFE()
    return pattern.sub(_visible_one, text)


# A line the runner reads as a command: "::" at its start once leading white space is trimmed, or
# "##[" anywhere in it (the legacy form). The runner compares by the culture's rules, which skip
# ignorable characters, so those are allowed in between here too. A line ends at LF or at a lone CR.
_IGN = f"[{_IGNORABLE}]"
_LEAD = f"(?:(?![\\r\\n])(?:\\s|{_IGN}))*"
_LINE_COMMAND = lazy.regex(f"(?:\\A|(?<=[\\r\\n]))({_LEAD}):(?={_IGN}*:)")
_LEGACY_COMMAND = lazy.regex(f"(#{_IGN}*#{_IGN}*)\\[")
# Every line command holds these; found by a literal scan, while _LINE_COMMAND tries every position
# (20 ms on a cloud image's 209 kB JSON report, where there is none)
_TWO_COLONS = lazy.regex(f":{_IGN}*:")


def neutralise_commands(text: str, colon: str = "\\x3a", bracket: str = "\\x5b") -> str:
    """No line of ``text`` is a workflow command: a line-leading ``::`` gets its first colon written as
    ``colon``, every ``##[`` its bracket as ``bracket`` (escapes that suit the output's syntax)."""
    if ":" in text and _TWO_COLONS().search(text):
        text = _LINE_COMMAND().sub(lambda m: m.group(1) + colon, text)
    if "[" in text:
        text = _LEGACY_COMMAND().sub(lambda m: m.group(1) + bracket, text)
    return text


def for_log(text: str) -> str:
    """One string from the image, for a terminal or a CI log line (text and github formats)."""
    return neutralise_commands(visible(text))


def workflow_data(text: str) -> str:
    """Workflow-command data (the Actions toolkit's escapeData); newlines stay meaningful."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_property(text: str) -> str:
    """A workflow-command property value (the toolkit's escapeProperty)."""
    return workflow_data(text).replace(":", "%3A").replace(",", "%2C")


# Markdown and HTML metacharacters, written as numeric character references: CommonMark never reads a
# reference as syntax (no emphasis, link, image, code span, autolink, raw HTML, table pipe, GitHub
# math, mention or issue reference can start from one).
_MARKDOWN_META = lazy.regex(r"[\\`*_{}\[\]<>()#+!|~&\"'$:@=^]")
_WWW = lazy.regex(r"(?i)(www)\.")


def for_markdown(text: str, *, line_start: bool = True) -> str:
    """One string for Markdown (a table cell, a list item): inline text on one line.

    Control and invisible characters (newlines too) become visible escapes, metacharacters numeric
    character references, and so does the first character unless it is a letter or ``/``, so no block
    construct (list, heading, quote, fence) can start; GFM's bare ``www.`` autolinks are broken too.
    ``line_start=False``: the string follows other text on its line, where no block construct can
    start, so its first character is left as it is.
    """
    text = visible(text)
    text = _MARKDOWN_META().sub(lambda m: m.group() if _intraword(text, m) else f"&#{ord(m.group())};", text)
    text = _WWW().sub(r"\1&#46;", text)
    if line_start and text and not (text[0].isalpha() or text[0] in "/&"):
        text = f"&#{ord(text[0])};{text[1:]}"
    return text


def _intraword(text: str, match: re.Match[str]) -> bool:
    """An ``_`` between two letters or digits (``ssh_host_key``): CommonMark's flanking rules let it
    neither open nor close emphasis, so it stays as it is and the Markdown stays readable."""
    start, end = match.span()
    return (
        match.group() == "_"
        and start > 0
        and end < len(text)
        and text[start - 1].isalnum()
        and text[end].isalnum()
    )


_NOT_XML = lazy.regex(r"[\ufffe\uffff]")


def for_xml(text: str) -> str:
    """One string for XML 1.0 text or attributes: no character XML cannot carry, nothing unsafe."""
    return _NOT_XML().sub(_visible_one, visible(text))


_JSON_RAW = lazy.regex(f"[{_IGNORABLE_NOT_C0}{_SEPARATORS}]")  # json.dumps escapes C0 itself


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


_encode_basestring = json.encoder.encode_basestring  # the C escaper, as json.dumps uses


def _json_string(text: str) -> str:
    """A string as ``json.dumps`` writes it, with the characters of ``_JSON_RAW`` escaped too. They
    are DEL or beyond ASCII, so most strings are not searched (a search of a whole report tried the
    long character class at every position: a fiftieth of a cloud image's audit)."""
    quoted = _encode_basestring(text)
    if text.isascii() and "\x7f" not in text:
        return quoted
    return _JSON_RAW().sub(_json_escape, quoted)


def json_text(data: Any, *, indent: int | None = 2, sort_keys: bool = False) -> str:
    """``data`` as JSON text that is valid UTF-8 and safe to print: the same value ``json.dumps`` gives."""
    cleaned = clean_tree(data)
    if indent is None:
        text = json.dumps(cleaned, sort_keys=sort_keys, ensure_ascii=False, allow_nan=False)
        text = _JSON_RAW().sub(_json_escape, text)
    else:  # json.dumps would leave its C encoder for a generator-based one (jsonindent's docstring)
        from imagelint.report.jsonindent import dumps_indented  # here: every stderr line imports escape

        text = dumps_indented(cleaned, indent, sort_keys=sort_keys, quote=_json_string)
    # "##[" can only be inside a string here; a JSON line never starts with "::"
    return neutralise_commands(text, colon="\\u003a", bracket="\\u005b")
