"""The unit-file syntax, as systemd's ``config_parse()`` reads it.

Lines end at ``\\n``, ``\\r`` or a NUL byte, or a run of them without repeats (``\\r\\n``, ``\\n\\r``,
``\\r\\0``: one end of line, as ``read_line()`` reads them). Lines whose first non-blank character is
``#`` or ``;`` are comments, even in the middle of a continuation. A line ending in an unescaped
backslash continues on the next line (the backslash becomes a space). ``[Section]`` headers must
close on the same line and hold no control character, quote or backslash, or the whole file is
refused; ``Key=value`` is split at the first ``=`` and both sides are stripped of blanks. A physical
line of 1 MiB (``LONG_LINE_MAX`` bytes) or more, a continued line over 1 MiB, or a non-comment line
that is not clean UTF-8 is also fatal. Nothing else is: lines without ``=`` and assignments before
any section are recorded as warnings and skipped, the way systemd logs and goes on. The first UTF-8
byte order mark is dropped from the start of whichever line has it, after the comment test (so a
comment behind it is not a comment) and after the length test (its three bytes count).

Words inside values (dependency lists, ``Alias=``) are split by :func:`split_words`, which follows
``extract_first_word()``: blanks separate words, single and double quotes group, and a backslash
escapes the next character.
"""

from __future__ import annotations

import re
import sys

from imagelint import lazy
from imagelint.facts.systemd.model import Assignment, ParsedFile, Problem

LONG_LINE_MAX = 1024 * 1024
WHITESPACE = " \t\n\r"
_BLANKS = WHITESPACE.encode()
# read_line(): one end of line is a run of CR, LF and NUL in which no byte repeats and nothing
# follows a NUL ("\r\n", "\n\r", "\r\0", "\n\r\0"... are one; "\n\n" and "\0\n" are two)
_EOL = re.compile(rb"\r\n\0?|\n\r\0?|[\r\n]\0?|\0")
_BOM = b"\xef\xbb\xbf"
_UNSAFE = re.compile("[\x01-\x1f\x7f\"'\\\\]")
MAX_WARNINGS = 5  # per file; the rest are counted in one summary warning
# What systemd's utf8_is_valid() refuses beyond malformed bytes (kept as surrogate escapes here):
# UTF-16 surrogates, U+FDD0..U+FDEF, and the last two code points of every plane.
_NOT_CLEAN = lazy.regex(  # compiled on the first line that is not ASCII (0.7 ms)
    "[\ud800-\udfff\ufdd0-\ufdef"
    + "".join(f"\\U{(plane << 16) | 0xFFFE:08x}\\U{(plane << 16) | 0xFFFF:08x}" for plane in range(17))
    + "]"
)


def _split_lines(data: bytes) -> list[bytes]:
    # without CR or NUL every end of line is one LF (what nearly every unit file has)
    lines = data.split(b"\n") if b"\r" not in data and b"\0" not in data else _EOL.split(data)
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def parse_unit_bytes(data: bytes, path: str) -> ParsedFile:
    """Parse the raw content of a unit file or drop-in found at image path ``path``.

    Never raises on any content: what systemd refuses is ``fatal``, what it logs is in ``warnings``.
    """
    parsed = ParsedFile(path, len(data))
    section: str | None = None
    parts: list[str] = []  # the pieces of a continued line so far (each backslash made a space)
    continued = 0  # their length in bytes, as systemd counts it
    start_line = 0
    bom_seen = False
    for number, raw in enumerate(_split_lines(data), start=1):
        # read_line() refuses a line of LONG_LINE_MAX bytes or more (the byte order mark included)
        if len(raw) >= LONG_LINE_MAX:
            parsed.fatal = Problem(path, number, "line of 1 MiB or more; systemd refuses the file")
            return parsed
        if raw.lstrip(_BLANKS)[:1] in (b"#", b";"):
            continue
        # the first byte order mark is dropped from whichever line has it (after the comment test)
        if not bom_seen and raw.startswith(_BOM):
            raw = raw[len(_BOM) :]
            bom_seen = True
        if parts:
            if continued + len(raw) > LONG_LINE_MAX:
                parsed.fatal = Problem(
                    path, number, "continued line longer than 1 MiB; systemd refuses the file"
                )
                return parsed
            continued += len(raw)
        else:
            continued = len(raw)
            start_line = number
        text = raw.decode("utf-8", errors="surrogateescape")
        # A continued piece ends in a space, so whether the logical line ends escaped depends on
        # this piece alone: scanning only it keeps long continuation chains linear.
        if text.endswith("\\") and _ends_escaped(text):
            parts.append(text[:-1] + " ")
            continue
        if parts:
            parts.append(text)
            text = "".join(parts)
            parts.clear()
        section = _parse_line(parsed, text, start_line, section)
        if parsed.fatal is not None:
            break
    else:
        if parts:
            _parse_line(parsed, "".join(parts), start_line, section)
    if len(parsed.warnings) > MAX_WARNINGS:
        extra_warnings = len(parsed.warnings) - MAX_WARNINGS
        del parsed.warnings[MAX_WARNINGS:]
        parsed.warnings.append(Problem(path, None, f"{extra_warnings} more warnings like these in this file"))
    return parsed


def _ends_escaped(text: str) -> bool:
    """Whether ``text`` ends in an unescaped backslash (an odd run of trailing backslashes)."""
    return (len(text) - len(text.rstrip("\\"))) % 2 == 1


def _parse_line(parsed: ParsedFile, line: str, number: int, section: str | None) -> str | None:
    text = line.strip(WHITESPACE)
    if not text or text[0] in "#;":
        return section
    if not text.isascii() and _NOT_CLEAN().search(text):  # what it refuses is never ASCII
        parsed.fatal = Problem(parsed.path, number, "line is not valid UTF-8; systemd refuses the file")
        return section
    if text[0] == "[":
        if text[-1] != "]":
            parsed.fatal = Problem(
                parsed.path, number, f"invalid section header {text[:80]!r}; systemd refuses the file"
            )
            return section
        name = sys.intern(text[1:-1])  # a few names, shared by every file
        if _UNSAFE.search(name):  # string_is_safe(): no control characters, quotes or backslashes
            parsed.fatal = Problem(
                parsed.path,
                number,
                f"bad characters in section header {text[:80]!r}; systemd refuses the file",
            )
            return section
        parsed.sections.append((name, number))
        return name
    if section is None:
        parsed.warnings.append(Problem(parsed.path, number, "assignment outside of any section, ignored"))
        return section
    eq = text.find("=")
    if eq < 0:
        parsed.warnings.append(Problem(parsed.path, number, f"missing '=' in {text[:80]!r}, line ignored"))
        return section
    if eq == 0:
        parsed.warnings.append(Problem(parsed.path, number, "missing key name before '=', line ignored"))
        return section
    key = sys.intern(text[:eq].strip(WHITESPACE))
    value = text[eq + 1 :].strip(WHITESPACE)
    parsed.assignments.append(Assignment(section, key, value, parsed.path, number))
    return section


class WordSyntaxError(ValueError):
    """A value whose quoting does not close."""


def split_words(value: str, *, unquote: bool = True, retain_escape: bool = True) -> list[str]:
    """Split a value into words the way ``extract_first_word()`` does.

    Raises WordSyntaxError on an unterminated quote or a trailing lone backslash, as systemd
    refuses those values.
    """
    words: list[str] = []
    i, n = 0, len(value)
    while True:
        while i < n and value[i] in WHITESPACE:
            i += 1
        if i >= n:
            return words
        word: list[str] = []
        quote: str | None = None
        while i < n:
            c = value[i]
            if quote is None and c in WHITESPACE:
                break
            if c == "\\":
                if i + 1 >= n:
                    raise WordSyntaxError(f"trailing backslash in {value!r}")
                word.append(value[i : i + 2] if retain_escape else value[i + 1])
                i += 2
                continue
            if unquote and quote is None and c in "'\"":
                quote = c
            elif unquote and c == quote:
                quote = None
            else:
                word.append(c)
            i += 1
        if quote is not None:
            raise WordSyntaxError(f"unterminated quote in {value!r}")
        words.append("".join(word))
