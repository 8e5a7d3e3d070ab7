"""Preset globs come from the image: matching them is linear, whatever the pattern."""

from __future__ import annotations

from imagelint import textmatch
from imagelint.facts.systemd.presets import _pattern_matcher, fnmatch


def test_a_backtracking_glob_is_matched_by_the_linear_engine() -> None:
    """``*a`` eight times then ``*b`` on 60 characters did not finish in 60 s with ``re``."""
    hostile = "*a" * 8 + "*b"
    matcher = _pattern_matcher(hostile)
    assert matcher is not None and matcher.engine is textmatch.Engine.RE2
    assert not fnmatch(hostile, "a" * 60)
    assert fnmatch(hostile, "a" * 60 + "b")


def test_fnmatch_semantics_are_kept() -> None:
    assert fnmatch("getty@*.service", "getty@tty1.service")
    assert fnmatch("[!x]y.service", "zy.service") and not fnmatch("[!x]y.service", "xy.service")
    assert fnmatch("a\\b", "a\\b")  # FNM_NOESCAPE: a backslash is literal
    assert fnmatch("*", "anything\nwith a newline")
    assert not fnmatch("[z-a]x", "x")  # a reversed range matches nothing, as fnmatch(3)
