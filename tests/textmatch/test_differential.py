"""textmatch gives exactly Python's ``re`` answers, whichever engine runs the pattern.

Random patterns from a small grammar (classes, shorthands, anchors, flags, repeats, alternation,
the odd backreference or lookahead that only the worker can run) are matched against random text
over an alphabet chosen where RE2 and Python disagree unless translated: ``\\v``, non-ASCII space
and digits, letters whose case folding differs (``ı``, ``K``, ``ſ``), U+FFFD and surrogate escapes.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from imagelint import textmatch

ALPHABET = "ab AZ_\n\t\v\x1c\x85\xa0\u2028é\u0131\u0130\u212a\u017f1\u0663\ufffd\udcff#:=."

_LITERAL = st.sampled_from(["a", "b", "A", " ", "_", "é", "1", "#", ":", r"\.", r"\n", r"\x85", r"\u0131"])
_SHORT = st.sampled_from([r"\d", r"\D", r"\s", r"\S", r"\w", r"\W", "."])
_ANCHOR = st.sampled_from(["^", "$", r"\A", r"\Z", r"\b", r"\B"])
_CLASS_ITEM = st.sampled_from(
    [
        "a",
        "b",
        "A-Z",
        r"\d",
        r"\s",
        r"\w",
        r"\S",
        r"\W",
        r"\D",
        "é",
        r"\ufffd",
        r"\ue000-\uffff",
        "_",
        r"\n",
        "#",
    ]
)
_CLASS = st.builds(
    lambda neg, items: "[" + ("^" if neg else "") + "".join(items) + "]",
    st.booleans(),
    st.lists(_CLASS_ITEM, min_size=1, max_size=3),
)
_ATOM = st.one_of(_LITERAL, _SHORT, _ANCHOR, _CLASS)
_QUANT = st.sampled_from(["", "", "", "*", "+", "?", "*?", "+?", "??", "{2}", "{1,3}", "{,2}", "{2,}?"])


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(lambda parts: "".join(parts), st.lists(inner, min_size=2, max_size=4)),
        st.builds(lambda a, b: f"{a}|{b}", inner, inner),
        st.builds(lambda body, q: f"(?:{body}){q}" if q else f"({body})", inner, _QUANT),
        st.builds(lambda f, body: f"(?{f}:{body})", st.sampled_from(["i", "s", "m", "-i", "a"]), inner),
        st.builds(lambda body: f"(?={body})", inner),  # lookahead: only the worker can run it
        st.builds(lambda body: f"({body})\\1", inner),  # backreference: the worker again
    )


PATTERN = st.builds(
    lambda prefix, body: prefix + body,
    st.sampled_from(["", "", "", "(?a)", "(?s)", "(?x)", "(?i)"]),
    st.recursive(st.builds(lambda a, q: a + q, _ATOM, _QUANT), _extend, max_leaves=6),
)


def _python(pattern: str, flags: int, text: str, limit: int) -> list[tuple[int, int]] | None:
    try:
        compiled = re.compile(pattern, flags)
    except re.error:
        return None
    return [m.span() for _, m in zip(range(limit), compiled.finditer(text), strict=False)]


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
@settings(
    max_examples=1500,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    pattern=PATTERN,
    text=st.text(alphabet=ALPHABET, max_size=24),
    multiline=st.booleans(),
    ignore_case=st.booleans(),
    limit=st.integers(1, 4),
)
def test_same_answers_as_python(
    pattern: str, text: str, multiline: bool, ignore_case: bool, limit: int
) -> None:
    flags = (re.MULTILINE if multiline else 0) | (re.IGNORECASE if ignore_case else 0)
    expected = _python(pattern, flags, text, limit)
    try:
        compiled = textmatch.compile(pattern, multiline=multiline, ignore_case=ignore_case, budget=10)
    except textmatch.PatternError:
        assert expected is None, pattern
        return
    assert expected is not None, pattern
    got = [m.span() for m in compiled.finditer(text, limit=limit)]
    assert got == expected, (pattern, compiled.engine, compiled._get().re2 and compiled._get().re2.pattern)
    first = compiled.search(text)
    assert (first.span() if first else None) == (expected[0] if expected else None)


def _python_class(pattern: str) -> list[int]:
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    return sorted({ord(m.group()) for m in re.finditer(pattern, everything)})


def test_the_tables_are_pythons_own() -> None:
    spaces = [c for low, high in textmatch.SPACE_RANGES for c in range(low, high + 1)]
    assert spaces == _python_class(r"\s")
    assert [ord(c) for c in textmatch.FOLDS_TO_ASCII] == [
        c for c in _python_class(r"(?i)[\x00-\x7f]") if c > 0x7F
    ]
