"""A generic symptom counter: entries matching indexed fields and an optional MESSAGE regex, per boot.

``count_signal(journal, spec)`` looks the spec's field matches up in the index (for kernel
signals, ``_TRANSPORT=kernel``), applies the regex to each candidate's MESSAGE, and returns per
boot the count, first and last time, the densest window (``max_within``) and a few sample lines.
The specs for ENA resets, NETDEV WATCHDOG, soft lockups, RCU stalls, hung tasks and OOM kills live in
``patterns.SIGNALS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field

from imagelint.facts.journal.journal import Journal, sample_text
from imagelint.facts.journal.patterns import SignalSpec
from imagelint.facts.journal.reader import FieldValue
from imagelint.facts.journal.restarts import max_in_window
from imagelint.facts.journal.scan import JournalScan
from imagelint.records import dataclass
from imagelint.textmatch import Pattern


@dataclass
class SignalBoot:
    boot_id: str
    times: list[int] = field(default_factory=list)  # realtime usec, ascending
    samples: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.times)

    @property
    def first_usec(self) -> int | None:
        return self.times[0] if self.times else None

    @property
    def last_usec(self) -> int | None:
        return self.times[-1] if self.times else None

    def max_within(self, seconds: float) -> int:
        return max_in_window(self.times, seconds)


@dataclass
class SignalReport:
    spec: SignalSpec
    boots: list[SignalBoot]  # in journal order; only boots where the signal occurred
    scan: JournalScan

    @property
    def total(self) -> int:
        return sum(b.count for b in self.boots)


def count_signal(
    journal: Journal,
    spec: SignalSpec,
    *,
    samples: int = 3,
    since_usec: int | None = None,
    until_usec: int | None = None,
) -> SignalReport:
    """Occurrences of ``spec`` per boot, optionally limited to a realtime window."""
    regex = spec.compiled()
    per: dict[str, SignalBoot] = {}
    entries = (
        journal.match(spec.matches, fields={"MESSAGE"}) if spec.matches else journal.entries({"MESSAGE"})
    )
    for e in entries:
        t = int(e["__REALTIME_TIMESTAMP"])  # type: ignore[call-overload]
        if (since_usec is not None and t < since_usec) or (until_usec is not None and t > until_usec):
            continue
        value = e.get("MESSAGE")
        if isinstance(value, list):
            value = value[0] if value else None
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        message = value if isinstance(value, str) else None
        if regex is not None and (message is None or not regex.search(message)):
            continue
        boot = str(e["_BOOT_ID"])
        rec = per.get(boot)
        if rec is None:
            rec = per[boot] = SignalBoot(boot)
        rec.times.append(t)
        if message is not None and len(rec.samples) < samples:
            rec.samples.append(sample_text(message))
    for rec in per.values():
        rec.times.sort()
    return SignalReport(spec, list(per.values()), journal.scan)


def first_text(value: FieldValue | None) -> str | None:
    """A field's (first) value as text: bytes decoded with replacement, None when absent."""
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def entry_matches(spec: SignalSpec, regex: Pattern | None, fields: Mapping[str, FieldValue]) -> bool:
    """Whether one entry (its decoded fields) is an occurrence of ``spec``; ``regex`` is ``spec.compiled()``.

    The same test ``count_signal`` makes through the index, for entries that arrive one at a time
    (``imagelint watch`` following a live journal): every field match holds (a value or one of
    several), then the MESSAGE pattern, if any, matches.
    """
    for name, wanted in spec.matches.items():
        value = first_text(fields.get(name))
        if value is None or (value != wanted if isinstance(wanted, str) else value not in wanted):
            return False
    if regex is None:
        return True
    message = first_text(fields.get("MESSAGE"))
    return message is not None and regex.search(message) is not None
