"""The indented JSON encoder writes what ``json.dumps`` writes, and refuses what it refuses."""

from __future__ import annotations

import enum
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from imagelint.report.escape import json_text
from imagelint.report.jsonindent import dumps_indented

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()  # any code point: surrogates, C0, separators, quotes, backslashes
)
_finite = st.floats(allow_nan=False, allow_infinity=False)
_keys = st.text() | st.integers() | _finite | st.booleans() | st.none()


def _trees_keyed_by(keys: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        _scalars,
        lambda inner: (
            st.lists(inner, max_size=5)
            | st.lists(inner, max_size=5).map(tuple)
            | st.dictionaries(keys, inner, max_size=5)
        ),
        max_leaves=30,
    )


_trees = _trees_keyed_by(_keys)


def _stdlib(value: Any, indent: int, sort_keys: bool = False) -> str:
    return json.dumps(value, indent=indent, sort_keys=sort_keys, ensure_ascii=False, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(_trees, st.integers(min_value=0, max_value=4))
def test_same_text_as_json_dumps(value: Any, indent: int) -> None:
    assert dumps_indented(value, indent) == _stdlib(value, indent)


@settings(max_examples=100, deadline=None)
@given(_trees_keyed_by(st.text()))
def test_sorted_keys_as_json_dumps(value: Any) -> None:
    assert dumps_indented(value, 2, sort_keys=True) == _stdlib(value, 2, sort_keys=True)


class _Colour(enum.StrEnum):
    RED = "red"


class _Level(enum.IntEnum):
    HIGH = 3


def test_subclasses_of_str_and_int_as_json_writes_them() -> None:
    value = {_Colour.RED: [_Colour.RED, _Level.HIGH, True, 1.5, -0.0, 10**30], _Level.HIGH: {}}
    assert dumps_indented(value, 2) == _stdlib(value, 2)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, {"k": [math.inf]}, {math.nan: 1}])
def test_a_float_json_cannot_carry_is_a_value_error(bad: Any) -> None:
    with pytest.raises(ValueError, match="Out of range float values"):
        _stdlib(bad, 2)
    with pytest.raises(ValueError, match="Out of range float values"):
        dumps_indented(bad, 2)


@pytest.mark.parametrize("bad", [{1, 2}, {"k": object()}, {(1, 2): "tuple key"}, b"bytes"])
def test_what_json_has_no_form_for_is_a_type_error(bad: Any) -> None:
    with pytest.raises(TypeError) as ours:
        dumps_indented(bad, 2)
    with pytest.raises(TypeError) as theirs:
        _stdlib(bad, 2)
    assert str(ours.value) == str(theirs.value)


def test_json_text_with_indent_escapes_as_before() -> None:
    """json_text (what the JSON format writes): the indented text of the cleaned tree, with the
    characters a terminal or a CI log would act on escaped, as it was written before."""
    value = {"a\u2028b": ["::set-output x", "##[group]", "\x1b[31m", {"n": 1.0, "e": []}], "f": math.inf}
    assert json_text(value, indent=2) == (
        "{\n"
        '  "a\\u2028b": [\n'
        '    "::set-output x",\n'
        '    "##\\u005bgroup]",\n'
        '    "\\u001b[31m",\n'
        "    {\n"
        '      "n": 1.0,\n'
        '      "e": []\n'
        "    }\n"
        "  ],\n"
        '  "f": null\n'
        "}"
    )
    assert json.loads(json_text(value, indent=2)) == json.loads(json_text(value, indent=None))


@settings(max_examples=300, deadline=None)
@given(_trees, st.integers(min_value=0, max_value=4))
def test_json_text_escapes_each_string_as_a_search_of_the_whole_text_did(value: Any, indent: int) -> None:
    """json_text escapes the characters a terminal acts on string by string (most are ASCII and not
    searched): the text is the one the search of the whole json.dumps text gave."""
    from imagelint.report.escape import _JSON_RAW, _json_escape, clean_tree, neutralise_commands

    whole = _JSON_RAW().sub(_json_escape, _stdlib(clean_tree(value), indent))
    assert json_text(value, indent=indent) == neutralise_commands(whole, colon="\\u003a", bracket="\\u005b")
