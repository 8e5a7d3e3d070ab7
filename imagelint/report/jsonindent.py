"""The text of ``json.dumps(value, indent=N, ensure_ascii=False, allow_nan=False)``, made fast.

With ``indent`` the standard library leaves its C encoder for a pure-Python one built of nested
generators, which cost a whole offline audit about a twentieth of its time writing its JSON report.
This encoder is one recursive function that appends to a list; only the strings go through the
standard library's C escaper (``json.encoder.encode_basestring``). The text is the same as
``json.dumps`` gives for every JSON-like value (tests/report/test_jsonindent.py compares the two on
generated trees), and so are its refusals: a float that is not finite is a ValueError, a key or value
JSON has no form for a TypeError.
"""

from __future__ import annotations

from collections.abc import Callable
from json.encoder import encode_basestring  # the C escaper when _json is there, as json.dumps uses
from typing import Any

_quote: Callable[[str], str] = encode_basestring
_INFINITY = float("inf")


def dumps_indented(
    value: Any, indent: int, *, sort_keys: bool = False, quote: Callable[[str], str] = _quote
) -> str:
    """``value`` as ``json.dumps(value, indent=indent, sort_keys=sort_keys, ensure_ascii=False,
    allow_nan=False)`` writes it; ``quote`` writes each string (key or value), by default as
    ``json.dumps`` does."""
    out: list[str] = []
    step = " " * indent
    newlines = ["\n"]  # by depth: the newline and the indentation of that level

    def _value(o: Any, depth: int) -> None:
        if isinstance(o, str):
            out.append(quote(o))
        elif o is None:
            out.append("null")
        elif o is True:
            out.append("true")
        elif o is False:
            out.append("false")
        elif isinstance(o, int):
            out.append(int.__repr__(o))
        elif isinstance(o, float):
            out.append(_float(o))
        elif isinstance(o, list | tuple):
            _list(o, depth)
        elif isinstance(o, dict):
            _dict(o, depth)
        else:
            raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")

    def _newline(depth: int) -> str:
        while len(newlines) <= depth:
            newlines.append(newlines[-1] + step)
        return newlines[depth]

    def _list(items: list[Any] | tuple[Any, ...], depth: int) -> None:
        if not items:
            out.append("[]")
            return
        inner = _newline(depth + 1)
        separator = "," + inner
        out.append("[" + inner)
        first = True
        for item in items:
            if not first:
                out.append(separator)
            first = False
            _value(item, depth + 1)
        out.append(_newline(depth) + "]")

    def _dict(mapping: dict[Any, Any], depth: int) -> None:
        if not mapping:
            out.append("{}")
            return
        inner = _newline(depth + 1)
        separator = "," + inner
        out.append("{" + inner)
        first = True
        for key, item in sorted(mapping.items()) if sort_keys else mapping.items():
            if not first:
                out.append(separator)
            first = False
            out.append(_key(key, quote) + ": ")
            _value(item, depth + 1)
        out.append(_newline(depth) + "}")

    _value(value, 0)
    return "".join(out)


def _float(o: float) -> str:
    if o != o or o in (_INFINITY, -_INFINITY):
        raise ValueError("Out of range float values are not JSON compliant: " + repr(o))
    return float.__repr__(o)


def _key(key: Any, quote: Callable[[str], str]) -> str:
    """A dict key as ``json`` writes it: a string, or a number or constant turned into one."""
    if isinstance(key, str):
        return quote(key)
    if isinstance(key, float):
        return _quote(_float(key))
    if key is True:
        return '"true"'
    if key is False:
        return '"false"'
    if key is None:
        return '"null"'
    if isinstance(key, int):
        return _quote(int.__repr__(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")
