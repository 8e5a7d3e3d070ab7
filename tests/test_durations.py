"""Command-line durations: units, zero where allowed, one-line usage errors otherwise."""

from __future__ import annotations

import pytest

from imagelint.durations import parse_duration
from imagelint.errors import UsageError


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("90s", 90), (" 10m ", 600), ("1.5h", 5400)])
def test_units(text: str, seconds: float) -> None:
    assert parse_duration(text, "--duration") == seconds


def test_zero_only_where_allowed() -> None:
    assert parse_duration("none", "--soak", allow_zero=True) == 0.0
    with pytest.raises(UsageError, match="--soak '0': give a positive duration"):
        parse_duration("0", "--soak")


@pytest.mark.parametrize("text", ["", "5d", "-1s", "1e3", "5 minutes"])
def test_anything_else_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError):
        parse_duration(text, "--poll")
