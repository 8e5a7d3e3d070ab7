"""Preset policy (``*.preset`` files) and the verdict it gives a unit name.

Files come from ``/etc``, ``/run``, ``/usr/local/lib``, ``/usr/lib`` and ``/lib`` ``systemd/system-preset``;
a file name in an earlier directory hides the same name in later ones, and all files are read in
file-name order. Each line is ``enable PATTERN [INSTANCE...]`` or ``disable PATTERN``; the first
rule whose shell pattern matches the unit name decides, and no match means *enabled*. Unparsable
lines are recorded and skipped, as systemd warns and skips them (systemd 252 knows no ``ignore``).

For the verdict of a plain name only the pattern counts: ``enable getty@.service tty1`` gives
``getty@.service`` the verdict *enabled*, and an instance such as ``getty@tty1.service`` is not
matched by it (that instance list only steers ``systemctl preset``).
"""

from __future__ import annotations

import re
from dataclasses import field
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from imagelint.errors import ImageReadError
from imagelint.facts.systemd import names
from imagelint.facts.systemd.model import Problem
from imagelint.facts.systemd.parser import WHITESPACE, WordSyntaxError, split_words
from imagelint.facts.systemd.paths import PRESET_DIRS
from imagelint.facts.systemd.sources import conf_files
from imagelint.records import dataclass
from imagelint.targets.interface import Target

if TYPE_CHECKING:
    from imagelint import textmatch


class PresetRule(NamedTuple):
    pattern: str
    enable: bool
    instances: tuple[str, ...]
    path: str
    line: int


@lru_cache(maxsize=1024)
def _pattern_matcher(pattern: str) -> textmatch.Pattern | None:
    """The preset glob as a linear-time matcher (RE2): a hostile ``*a*a*a…b`` cannot backtrack.

    None for a glob no engine accepts (a reversed range): like fnmatch(3), it matches nothing.
    Imported here: most images' preset lines are literal names, which need no matcher.
    """
    from imagelint import textmatch

    try:
        return textmatch.compile("(?s)\\A" + _pattern_regex(pattern) + "\\Z")
    except textmatch.PatternError:
        return None


def _pattern_regex(pattern: str) -> str:
    """fnmatch(3) with FNM_NOESCAPE: ``*``, ``?``, bracket sets with ``!`` or ``^``; ``\\`` is literal."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            j = i
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(c))
                continue
            body = pattern[i:j]
            i = j + 1
            negate = body[:1] in ("!", "^")
            if negate:
                body = body[1:]
            body = body.replace("\\", "\\\\").replace("^", "\\^")
            out.append(f"[{'^' if negate else ''}{body}]")
        else:
            out.append(re.escape(c))
    return "".join(out)


@lru_cache(maxsize=1024)
def _literal_head(pattern: str) -> tuple[str, bool]:
    """The pattern's text before its first ``*``, ``?`` or ``[`` (matched literally), and whether
    that is the whole pattern."""
    cut = min((i for i in map(pattern.find, "*?[") if i >= 0), default=len(pattern))
    return pattern[:cut], cut == len(pattern)


def fnmatch(pattern: str, name: str) -> bool:
    head, literal = _literal_head(pattern)
    if literal:  # most preset lines name one unit: no matcher needed
        return name == pattern
    if not name.startswith(head):
        return False
    matcher = _pattern_matcher(pattern)
    return matcher is not None and matcher.search(name) is not None


def _first_word(line: str, word: str) -> str | None:
    if not line.startswith(word):
        return None
    rest = line[len(word) :]
    if not rest:
        return rest
    stripped = rest.lstrip(WHITESPACE)
    return None if stripped == rest else stripped


@dataclass
class Presets:
    rules: list[PresetRule] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @classmethod
    def load(cls, target: Target) -> Presets:
        presets = cls()
        paths, problems = conf_files(target, PRESET_DIRS, ".preset")
        presets.problems.extend(problems)
        for path in paths:
            try:
                text = target.read_text(path).text
            except ImageReadError as exc:
                presets.problems.append(Problem(path, None, f"preset file not read: {exc.reason}"))
                continue
            presets.files.append(path)
            presets._parse(path, text)
        return presets

    def _parse(self, path: str, text: str) -> None:
        for number, raw in enumerate(text.split("\n"), start=1):
            line = raw.strip(WHITESPACE)
            if not line or line[0] in "#;":
                continue
            rule = self._parse_rule(line, path, number)
            if rule is None:
                self.problems.append(Problem(path, number, f"cannot parse preset line {line!r}; ignored"))
            else:
                self.rules.append(rule)

    @staticmethod
    def _parse_rule(line: str, path: str, number: int) -> PresetRule | None:
        param = _first_word(line, "enable")
        if param is not None:
            try:
                words = split_words(param, unquote=False, retain_escape=True)
            except WordSyntaxError:
                return None
            if not words:
                return None
            unit, instances = words[0], tuple(words[1:])
            if instances and names.name_kind(unit) is not names.NameKind.TEMPLATE:
                return None
            return PresetRule(unit, True, instances, path, number)
        param = _first_word(line, "disable")
        if param is not None:
            return PresetRule(param, False, (), path, number) if param else None
        return None

    def rule_for(self, name: str) -> PresetRule | None:
        for rule in self.rules:
            if fnmatch(rule.pattern, name):
                return rule
        return None

    def verdict(self, name: str) -> str:
        """``enabled`` or ``disabled``, as ``systemctl list-unit-files`` shows in its PRESET column."""
        rule = self.rule_for(name)
        return "enabled" if rule is None or rule.enable else "disabled"
