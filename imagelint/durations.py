"""Durations on the command line ('90s', '10m', '1h'), for every command that waits or polls.

Not soak code: `soak`, `ami`, `fleet` and `ami cleanup` all take durations, and none of them should
import another command to read "5s".
"""

from __future__ import annotations

import re

from imagelint.errors import UsageError

_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*")


def parse_duration(text: str, option: str, *, allow_zero: bool = False) -> float:
    """'90', '90s', '10m', '1h' → seconds; with ``allow_zero``, '0', '0s' and 'none' → 0."""
    if allow_zero and text.strip() in ("0", "0s", "none"):
        return 0.0
    match = _DURATION.fullmatch(text)
    if not match or float(match.group(1)) <= 0:
        raise UsageError(f"{option} {text!r}: give a positive duration such as 90s, 10m or 1h")
    return float(match.group(1)) * _UNITS[match.group(2)]
