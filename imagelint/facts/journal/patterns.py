"""Everything systemd-version-specific that the analyses match on, in one table.

Structured records come first: a MESSAGE_ID is stable across systemd versions and is looked up
through the journal's index. Text patterns exist only for events that have no structured record
in some systemd generation; each says which generations need it and which indexed match narrows
the entries it is tried on (PID 1's own entries, by journald's trusted ``_PID`` and ``_UID``), so no
pattern ever forces a full scan. Structured records are accepted from service managers only, by the
same trusted fields (see ``restarts``): anyone can log a MESSAGE_ID.

Kernel and symptom signals (ENA resets, watchdogs, lockups, OOM kills) are data for the generic
signal matcher in ``signals``.

Journal messages are data from the image, so every pattern here (and a rule's own ``pattern``) is a
``textmatch.Pattern``: linear-time RE2 where it can run the pattern, else Python's ``re`` under a time
budget. Built-in patterns compile on first use, so importing this table costs nothing, and are
written so that RE2 runs them on any text: ``\\s*\\Z`` rather than ``\\s*$`` (the same answers), and
``(?:^|\\W)ena[^\\w\\n]`` rather than ``\\bena\\b`` (RE2's ``\\b`` is ASCII-only, so non-ASCII text
would go to the worker).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from imagelint.textmatch import Pattern

# --- MESSAGE_IDs (systemd's catalog; verified in systemd 252's systemd.catalog) ---------------
RESTART_SCHEDULED = "5eb03494b6584870a536b337290809b3"  # UNIT, N_RESTARTS (since 236)
UNIT_FAILED = "d9b373ed55a64feb8242e02dbe79a49c"  # UNIT, UNIT_RESULT
UNIT_PROCESS_EXIT = "98e322203f7a4ed290d09fe03c09fe15"  # UNIT, EXIT_CODE, EXIT_STATUS, COMMAND
JOB_FAILED = "be02cf6855d2428ba40df7e9d022f03d"  # JOB_RESULT
UNIT_STARTED = "39f53479d3a045ac8e11786248231fbf"
UNIT_OOM = "fe6faa94e7774663a0da52717891d8ef"

UNIT_FIELDS = ("UNIT", "USER_UNIT")  # the system manager logs UNIT=, a user manager USER_UNIT=
START_LIMIT_RESULT = "start-limit-hit"


@dataclass(frozen=True)
class TextPattern:
    """A PID-1 message recognised by its text, for generations that log no structured record."""

    key: str  # what it means, e.g. "start-limit-hit"
    regex: Pattern
    generations: str  # which systemd versions need it
    # narrows the candidates to PID 1's own entries: journald's trusted fields, which no client can set
    index: dict[str, str] = field(default_factory=lambda: {"_PID": "1", "_UID": "0"})


# "Start request repeated too quickly." is a plain log_unit_warning() with no MESSAGE_ID in every
# version so far; on 252 a unit that trips the limit while auto-restarting is then recorded as
# UNIT_RESULT=exit-code, so this text is the only trace. Newer versions follow it with
# UNIT_RESULT=start-limit-hit; the analysis counts such a pair once.
START_LIMIT_TEXT = TextPattern(
    key="start-limit-hit",
    regex=Pattern(r"(?:^|: )Start request repeated too quickly\.?\s*\Z", where="journal MESSAGE"),
    generations="all (the only record of the start limit on systemd <= 252 during auto-restart)",
)

# Before systemd 236 a scheduled restart had no MESSAGE_ID and no N_RESTARTS.
LEGACY_RESTART_TEXT = TextPattern(
    key="restart-scheduled",
    regex=Pattern(
        r"(?:^|: )Service (?:hold-off time over|has no hold-off time), scheduling restart\.?\s*\Z",
        where="journal MESSAGE",
    ),
    generations="systemd < 236 (no MESSAGE_ID 5eb0… yet)",
)

TEXT_PATTERNS = (START_LIMIT_TEXT, LEGACY_RESTART_TEXT)


@dataclass(frozen=True)
class SignalSpec:
    """A kernel or service symptom: indexed field matches plus an optional MESSAGE regex."""

    name: str
    matches: dict[str, str | tuple[str, ...]]
    message: str | None = None
    description: str = ""

    def compiled(self) -> Pattern | None:
        """The MESSAGE pattern, bounded (see ``imagelint.textmatch``); None when there is none."""
        if not self.message:
            return None
        return Pattern(self.message, where=f"journal MESSAGE (signal {self.name})")


KERNEL: dict[str, str | tuple[str, ...]] = {"_TRANSPORT": "kernel"}

SIGNALS: dict[str, SignalSpec] = {
    s.name: s
    for s in (
        SignalSpec(
            "ena-tx-timeout",
            KERNEL,
            r"(?:^|\W)ena[^\w\n].*Found a Tx that wasn't completed on time",
            "ENA: a transmit was not completed in time (NAPI starved or device stuck)",
        ),
        SignalSpec(
            "ena-reset",
            KERNEL,
            r"(?:^|\W)ena[^\w\n].*Trigger reset is on",
            "ENA: the driver is resetting the device",
        ),
        SignalSpec(
            "ena-tx-paused",
            KERNEL,
            r"(?:^|\W)ena[^\w\n].*TX q \d+ is paused for too long",
            "ENA: a transmit queue stayed paused past the threshold",
        ),
        SignalSpec(
            "netdev-watchdog",
            KERNEL,
            r"NETDEV WATCHDOG: \S+ \(.*\): transmit queue \d+ timed out",
            "a network transmit queue timed out",
        ),
        SignalSpec(
            "soft-lockup",
            KERNEL,
            r"BUG: soft lockup - CPU#\d+ stuck for",
            "a CPU ran kernel code without scheduling for too long",
        ),
        SignalSpec(
            "rcu-stall",
            KERNEL,
            r"rcu: INFO: rcu_\w+ (?:self-)?detected stalls?|rcu_\w+ detected stalls on CPUs",
            "RCU grace period stalled",
        ),
        SignalSpec(
            "hung-task",
            KERNEL,
            r"INFO: task \S+ blocked for more than \d+ seconds",
            "a task stuck in uninterruptible sleep",
        ),
        SignalSpec(
            "oom-kill",
            KERNEL,
            r"(?:Memory cgroup )?[Oo]ut of memory: Kill(?:ed)? process",
            "the OOM killer killed a process",
        ),
    )
}
