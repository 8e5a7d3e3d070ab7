"""Restarts a journal logged in a time window: what a soak cites as evidence beside its own counters."""

from __future__ import annotations

from imagelint.facts.journal.restarts import analyze_restarts
from imagelint.facts.journal.sources import open_image
from imagelint.targets import RootfsTarget


def restarts_logged_between(
    target: RootfsTarget, since: float, until: float
) -> tuple[dict[str, int] | None, str]:
    """Restarts the target's journal logged between two wall-clock times (seconds), per unit, and a
    one-line account of the files read; (None, why) when there is no journal."""
    with open_image(target) as journal:
        if journal.scan.files_found == 0:
            return None, "no journal on this host"
        counts = analyze_restarts(journal).restarts_between(int(since * 1e6), int(until * 1e6))
        return counts, journal.scan.summary().splitlines()[0]
