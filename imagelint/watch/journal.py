"""Kernel symptom counters from the host journal, followed entry by entry (each counted once).

The signals are the journal analyses' own (:data:`imagelint.facts.journal.patterns.SIGNALS`: ENA
resets and Tx timeouts, NETDEV WATCHDOG, soft lockups, RCU stalls, hung tasks, OOM kills), matched
by :func:`imagelint.facts.journal.signals.entry_matches`. Following is
:class:`imagelint.probes.journal.JournalFollower`: counters count what was logged while
watching, across rotations. A MESSAGE the regex budget gives up on is counted in ``unmatched``.
"""

from __future__ import annotations

from imagelint.errors import ImageReadError
from imagelint.facts.journal.patterns import SIGNALS
from imagelint.facts.journal.signals import entry_matches
from imagelint.probes.journal import FollowStats, JournalFollower

DEFAULT_JOURNAL_DIR = "/var/log/journal"


class SignalCounter:
    def __init__(self, directory: str, *, from_start: bool = False) -> None:
        self._specs = [(spec, spec.compiled()) for spec in SIGNALS.values()]
        fields = {"MESSAGE", *(name for spec in SIGNALS.values() for name in spec.matches)}
        self.follower = JournalFollower(directory, fields, from_start=from_start)
        self.counts: dict[str, int] = dict.fromkeys(SIGNALS, 0)
        self.unmatched = 0

    @property
    def stats(self) -> FollowStats:
        return self.follower.stats

    def poll(self) -> int:
        """Read what was appended and count it; the number of new entries. Raises ``JournalUnavailable``."""
        entries = self.follower.poll()
        for entry in entries:
            for spec, regex in self._specs:
                try:
                    hit = entry_matches(spec, regex, entry.fields)
                except ImageReadError:  # the regex budget ran out on a hostile MESSAGE
                    self.unmatched += 1
                    continue
                if hit:
                    self.counts[spec.name] += 1
        return len(entries)
