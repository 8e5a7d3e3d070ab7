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


def test_literal_patterns_and_literal_heads_decide_without_a_matcher() -> None:
    """A pattern without ``*``, ``?`` or ``[`` matches only itself; a name not starting with the
    text before the first of them cannot match (both are decided before any matcher is built)."""
    _pattern_matcher.cache_clear()
    assert fnmatch("ssh.service", "ssh.service") and not fnmatch("ssh.service", "ssh.servicex")
    assert not fnmatch("ssh.service", "sshXservice")  # "." is literal
    assert not fnmatch("systemd-journal-upload.*", "systemd-journal-remote.service")
    assert _pattern_matcher.cache_info().currsize == 0
    assert fnmatch("systemd-journal-upload.*", "systemd-journal-upload.service")
    assert fnmatch("*", "") and fnmatch("?x[ab]", "yxa") and not fnmatch("?x[ab]", "yxc")
