"""Restart loops, start-limit hits and failures per unit and per boot, from indexed lookups only.

``analyze_restarts(journal)`` asks the index for the three structured records (restart scheduled,
unit failed, process exited) and for PID 1's own entries (for the text-only records listed in
``patterns``), reads them in journal order and folds them per (unit, boot):

* ``restarts``: scheduled-restart records (``5eb0…``), with the highest ``N_RESTARTS`` seen, the
  first and last time, and ``rate_per_hour`` = (restarts − 1) / hours between first and last, so a
  steady 10 s cadence reads 360/h however long it ran; ``max_restarts_within(seconds)`` gives the
  densest window;
* ``start_limit_hits``: ``UNIT_RESULT=start-limit-hit`` failures plus PID 1's "Start request
  repeated too quickly." lines that are not followed within 10 s by such a failure (one event, one
  count);
* ``failures``: failure records by ``UNIT_RESULT``; ``last_exit``: the last process-exit record;
* ``samples``: the last few distinct messages the unit's own processes logged in that boot.

Only service managers' records count, and journald's trusted fields (the underscore fields it takes
from the kernel's credentials and the sender's cgroup; clients cannot set them) say who sent each one:

* the system manager's (``UNIT=``): ``_PID=1`` and ``_UID=0``;
* a user manager's (``USER_UNIT=``, ``manager="user"``): not PID 1, and sent from the manager's own
  cgroup, ``_SYSTEMD_UNIT=user@<_UID>.service`` with ``_SYSTEMD_USER_UNIT=init.scope`` (or none, as
  before user managers had an ``init.scope``), so a user's other processes cannot pass for it.

Anything else carrying the same fields (``logger --journald MESSAGE_ID=5eb0… UNIT=x``, ``systemd-cat``)
is counted in ``RestartReport.untrusted`` and nowhere else: an unprivileged user on a soaked host must
not be able to fake a restart loop and fail the gate.

Pure functions of the journal: no thresholds, no verdicts (those belong to the rules).
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import field

from imagelint.facts.journal.journal import Journal
from imagelint.facts.journal.patterns import (
    LEGACY_RESTART_TEXT,
    RESTART_SCHEDULED,
    START_LIMIT_RESULT,
    START_LIMIT_TEXT,
    UNIT_FAILED,
    UNIT_FIELDS,
    UNIT_PROCESS_EXIT,
)
from imagelint.facts.journal.reader import FieldValue, JournalFile
from imagelint.facts.journal.scan import JournalScan
from imagelint.records import dataclass

PAIRING_USEC = 10_000_000  # a start-limit text line and its structured failure, if any, are this close
# what a structured record is read for; the MESSAGE only of entries without a MESSAGE_ID (the text
# patterns), so the restart, failure and exit records cost no more than these few shared values
_SENDER = ("_PID", "_UID", "_SYSTEMD_UNIT", "_SYSTEMD_USER_UNIT")  # journald's, never the client's
_FIELDS = frozenset(
    {"MESSAGE_ID", "N_RESTARTS", "UNIT_RESULT", "EXIT_CODE", "EXIT_STATUS", *UNIT_FIELDS, *_SENDER}
)
_MESSAGE = frozenset({"MESSAGE"})


@dataclass(frozen=True)
class ExitStatus:
    code: str  # exited, killed, dumped
    status: str  # exit status number or signal name
    time_usec: int


@dataclass
class UnitRestarts:
    """What the journal says about one unit during one boot."""

    unit: str
    boot_id: str
    manager: str = "system"  # "user" when the record came from a user manager (USER_UNIT=)
    restart_times: list[int] = field(default_factory=list)  # realtime usec of each scheduled restart
    max_n_restarts: int | None = None
    start_limit_hits: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    last_exit: ExitStatus | None = None
    samples: list[str] = field(default_factory=list)
    _limit_texts: list[int] = field(default_factory=list, repr=False)
    _limit_results: list[int] = field(default_factory=list, repr=False)

    @property
    def restarts(self) -> int:
        return len(self.restart_times)

    @property
    def first_usec(self) -> int | None:
        return self.restart_times[0] if self.restart_times else None

    @property
    def last_usec(self) -> int | None:
        return self.restart_times[-1] if self.restart_times else None

    @property
    def rate_per_hour(self) -> float | None:
        """(restarts − 1) per hour between the first and last restart; None below two restarts."""
        if len(self.restart_times) < 2:
            return None
        span = self.restart_times[-1] - self.restart_times[0]
        return None if span <= 0 else (len(self.restart_times) - 1) * 3_600_000_000 / span

    @property
    def failures_total(self) -> int:
        return sum(self.failures.values())

    def max_restarts_within(self, seconds: float) -> int:
        """The most restarts inside any window of ``seconds`` (sliding, inclusive)."""
        return max_in_window(self.restart_times, seconds)

    def to_dict(self) -> dict[str, object]:
        return {
            "unit": self.unit,
            "boot_id": self.boot_id,
            "manager": self.manager,
            "restarts": self.restarts,
            "max_n_restarts": self.max_n_restarts,
            "first_usec": self.first_usec,
            "last_usec": self.last_usec,
            "rate_per_hour": self.rate_per_hour,
            "start_limit_hits": self.start_limit_hits,
            "failures": dict(self.failures),
            "last_exit": None if self.last_exit is None else vars(self.last_exit),
            "samples": self.samples,
        }


def max_in_window(times: list[int], seconds: float) -> int:
    """Largest number of (sorted) realtime-usec timestamps inside any ``seconds``-long window."""
    width = int(seconds * 1_000_000)
    best = 0
    for i, t in enumerate(times):
        j = bisect.bisect_right(times, t + width, lo=i)
        best = max(best, j - i)
    return best


@dataclass
class RestartReport:
    units: list[UnitRestarts]  # ordered by boot (first seen), then unit name
    boots: list[str]  # boot ids in the order they first appear
    scan: JournalScan
    untrusted: int = 0  # records whose trusted fields say no service manager sent them (ignored)

    def for_unit(self, unit: str) -> list[UnitRestarts]:
        return [u for u in self.units if u.unit == unit]

    def restarts_between(self, since_usec: int, until_usec: int) -> dict[str, int]:
        """Scheduled restarts per unit with a realtime stamp in [since, until], most first."""
        counts: dict[str, int] = {}
        for rec in self.units:
            n = bisect.bisect_right(rec.restart_times, until_usec) - bisect.bisect_left(
                rec.restart_times, since_usec
            )
            if n:
                counts[rec.unit] = counts.get(rec.unit, 0) + n
        return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))

    def to_dict(self) -> dict[str, object]:
        return {
            "boots": self.boots,
            "units": [u.to_dict() for u in self.units],
            "untrusted": self.untrusted,
            "scan": self.scan.to_dict(),
        }


def _first(value: object) -> str | None:
    if isinstance(value, list):
        value = value[-1] if value else None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None


def _holds(value: FieldValue | None, wanted: str) -> bool:
    """Whether a field's value, or one of its values when repeated, is ``wanted``."""
    return value == wanted or (isinstance(value, list) and wanted in value)


def _sent_by(e: dict[str, FieldValue]) -> tuple[str, str] | None:
    """(unit, "system" or "user") when a service manager sent the record ``e``, by journald's trusted
    fields (see the module docstring); None when anyone else did. A repeated trusted field is not
    journald's doing: None."""
    pid, uid = e.get("_PID"), e.get("_UID")
    if not isinstance(pid, str) or not isinstance(uid, str):
        return None
    if pid == "1":
        unit = e.get("UNIT")
        return (unit, "system") if uid == "0" and isinstance(unit, str) else None
    unit = e.get("USER_UNIT")
    if (
        isinstance(unit, str)
        and e.get("_SYSTEMD_UNIT") == f"user@{uid}.service"
        and e.get("_SYSTEMD_USER_UNIT", "init.scope") == "init.scope"
    ):
        return unit, "user"
    return None


def _decode(jf: JournalFile, off: int) -> tuple[str, int, dict[str, FieldValue]]:
    """(boot, realtime, fields) of one candidate: the record's fields, its MESSAGE only if it has no
    MESSAGE_ID (only then can a text pattern apply)."""
    boot, t, fields = jf.fields_at(off, _FIELDS)
    if "MESSAGE_ID" not in fields:
        fields.update(jf.fields_at(off, _MESSAGE)[2])
    return boot, t, fields


def analyze_restarts(journal: Journal, *, samples: int = 3) -> RestartReport:
    """Fold restart, failure, exit and start-limit records per (unit, boot)."""
    per: dict[tuple[str, str], UnitRestarts] = {}
    boots: dict[str, None] = {}
    untrusted = 0
    stream = journal.match_any_decoded(
        [
            {"MESSAGE_ID": (RESTART_SCHEDULED, UNIT_FAILED, UNIT_PROCESS_EXIT)},
            # text patterns apply only where no structured record exists
            (START_LIMIT_TEXT.index, ("MESSAGE_ID",)),
            (LEGACY_RESTART_TEXT.index, ("MESSAGE_ID",)),
        ],
        _decode,
    )
    for boot, t, e in stream:
        sender = _sent_by(e)
        if sender is None and "MESSAGE_ID" not in e and not _holds(e.get("_UID"), "0"):
            continue  # a text candidate by _PID=1 alone (see ``TextPattern.index``): not one at all
        boots.setdefault(boot)
        if sender is None:
            untrusted += 1
            continue
        unit, manager = sender
        mid = _first(e.get("MESSAGE_ID"))
        rec = per.get((unit, boot))
        if rec is None:
            rec = per[(unit, boot)] = UnitRestarts(unit, boot, manager)
        if mid == RESTART_SCHEDULED:
            rec.restart_times.append(t)
            n = _first(e.get("N_RESTARTS"))
            # ASCII digits only: str.isdigit() accepts "²", which int() refuses
            if n is not None and n.isascii() and n.isdigit() and len(n) <= 20:
                rec.max_n_restarts = max(rec.max_n_restarts or 0, int(n))
        elif mid == UNIT_FAILED:
            result = _first(e.get("UNIT_RESULT")) or "unknown"
            rec.failures[result] += 1
            if result == START_LIMIT_RESULT:
                rec._limit_results.append(t)
        elif mid == UNIT_PROCESS_EXIT:
            rec.last_exit = ExitStatus(
                _first(e.get("EXIT_CODE")) or "", _first(e.get("EXIT_STATUS")) or "", t
            )
        elif mid is None:
            message = _first(e.get("MESSAGE")) or ""
            if START_LIMIT_TEXT.regex.search(message):
                rec._limit_texts.append(t)
            elif LEGACY_RESTART_TEXT.regex.search(message):
                rec.restart_times.append(t)
    for rec in per.values():
        rec.restart_times.sort()
        paired = sum(
            1 for t in rec._limit_texts if any(0 <= r - t <= PAIRING_USEC for r in rec._limit_results)
        )
        rec.start_limit_hits = len(rec._limit_results) + len(rec._limit_texts) - paired
    order = {b: i for i, b in enumerate(boots)}
    units = sorted(per.values(), key=lambda r: (order[r.boot_id], r.unit))
    interesting = [u for u in units if u.restarts or u.failures or u.start_limit_hits]
    if samples:
        _add_samples(journal, interesting, samples)
    return RestartReport(
        [u for u in units if u.restarts or u.failures or u.start_limit_hits or u.last_exit],
        list(boots),
        journal.scan,
        untrusted,
    )


def _add_samples(journal: Journal, recs: list[UnitRestarts], k: int) -> None:
    """The last ``k`` distinct messages each unit's own processes logged, per boot."""
    by_unit: dict[str, dict[str, UnitRestarts]] = {}
    for r in recs:
        if r.manager == "system":
            by_unit.setdefault(r.unit, {})[r.boot_id] = r
    for unit, per_boot in by_unit.items():
        for boot, messages in journal.tail_messages({"_SYSTEMD_UNIT": unit}, list(per_boot), k).items():
            per_boot[boot].samples = messages
