"""Numbers in what a bundle records, parsed strictly.

A bundle comes from a machine we do not trust, and Python's ``int()`` and ``float()`` are generous:
``int("²")`` raises where ``"²".isdigit()`` is true, ``int("٣")`` is 3, ``float("nan")``,
``float("inf")``, ``float("1e400")`` and ``"1_000"`` all parse. Here a count is ASCII digits only,
seconds are ASCII ``digits[.digits]`` (finite by construction), both within a stated range; anything
else is an :class:`ImageReadError` naming the member (and line), so the run is inconclusive.
"""

from __future__ import annotations

import re

from imagelint.errors import ImageReadError

_COUNT = re.compile(r"[0-9]{1,18}")
_DECIMAL = re.compile(r"[0-9]{1,15}(?:\.[0-9]{1,15})?")

MAX_COUNT = 10**15
MAX_SECONDS = 1e11  # wall clock and uptime: year 5138, 3,000 years up


def count(text: str | None, where: str, what: str, *, most: int = MAX_COUNT, least: int = 0) -> int:
    """A non-negative integer of ASCII digits between ``least`` and ``most``."""
    if text is None or not _COUNT.fullmatch(text) or not least <= int(text) <= most:
        raise ImageReadError(where, f"{what} {_shown(text)} is not a count from {least:,} to {most:,}")
    return int(text)


def seconds(text: str | None, where: str, what: str, *, most: float = MAX_SECONDS) -> float:
    """A non-negative decimal (``123`` or ``123.456``) of ASCII digits, at most ``most``."""
    if text is None or not _DECIMAL.fullmatch(text) or float(text) > most:
        raise ImageReadError(where, f"{what} {_shown(text)} is not a number of seconds from 0 to {most:g}")
    return float(text)


def _shown(text: str | None) -> str:
    return "(missing)" if text is None else repr(text[:40])
