"""ENA device resets as episodes: the Tx-timeout lines, the reset and its completion counted once.

One reset of an ENA device leaves several kernel lines, their wording depending on the driver release
(``patterns.ENA_RESET_PATH``): Tx completions missed on a queue (often one line per descriptor, then
a "lost completions above threshold" line), or the kernel's netdev watchdog and "TX q N is paused",
or a keep-alive, admin-queue or MSI-X problem, or a completion the driver cannot use (an unknown
req_id, a corrupt descriptor); then the decision ("Resetting the device"), the reset task ("Trigger
reset is on", printed exactly once per reset by every release) and the completion ("Device reset
completed ...", or a failure). ``analyze_ena_resets`` groups them per boot and device (the PCI
address every driver line starts with) into episodes:

* a line joins the device's open episode unless that reset has completed, or has started (its reset
  task ran) or failed and this line is a new symptom or a second "Trigger reset" rather than a
  completion or failure (a failed reset logs its failure twice: "Reset attempt failed..." or, from
  2.17.0, "Restore attempt failed." from the restore, then "Device reset completed, status: -N");
* or more than ``gap`` seconds passed since the episode's last line (default 60 s).

Why 60 s: the driver's timer checks every second; a Tx completion is missed after 5 s (ENA_TX_TIMEOUT,
or the device's hint), under suspected NAPI starvation after twice that; the netdev watchdog fires
after the same 5 s, the keep-alive after 6 s; the reset task runs within the next second and a reset
takes seconds. The lines of one reset are therefore well within 60 s of each other, while two resets
are told apart by their reset lines, not by the clock, so a generous gap does not merge them; a gap
only ends an episode whose reset never came (symptoms that did not lead to a reset) or whose
completion was never logged.

A cause line printed where the driver decides the reset (``EnaMessage.decides``: the keep-alive and
admin-queue timeouts, an MSI-X problem, lost Tx completions past the threshold, the netdev watchdog's
paused queue and NAPI suspicion, the device's request; ``patterns`` gives each wording's releases)
also counts as the decision (``reset-decided`` after its cause in ``roles``): a reset follows it in
every release, so an episode of that line alone is a reset decided but not seen to complete, as a
lone "Resetting the device" is. On a starving host or in a journal cut short it may be all that
survived. The lines that follow it (the reset task, the completion) join the same episode, so the
whole sequence is one reset.

Each episode keeps the queues (qid) and the NAPI handler's CPUs the wordings give (the CPU only from
driver 2.17.0's "napi CPU: N"), the wordings seen, and sample lines.
"""

from __future__ import annotations

import re
from dataclasses import field

from imagelint.facts.journal.journal import Journal, sample_text
from imagelint.facts.journal.patterns import (
    ENA_ANY,
    ENA_DEVICE,
    ENA_RESET_PATH,
    KERNEL,
    RESET_DECIDED,
    RESET_DONE,
    RESET_FAILED,
    RESET_STARTED,
    EnaMessage,
)
from imagelint.facts.journal.scan import JournalScan
from imagelint.facts.journal.signals import first_text
from imagelint.records import dataclass
from imagelint.textmatch import Pattern

DEFAULT_GAP = 60.0  # seconds (see the module docstring)
UNKNOWN_DEVICE = "unknown"
RESET_ROLES = (RESET_DECIDED, RESET_STARTED, RESET_DONE, RESET_FAILED)  # the rest are causes


@dataclass
class EnaEpisode:
    """The lines of one reset (or of symptoms that led to none) on one device in one boot."""

    boot_id: str
    device: str  # the PCI address, e.g. 0000:00:05.0
    first_usec: int
    last_usec: int
    roles: list[str] = field(default_factory=list)  # in order of first appearance
    wordings: list[str] = field(default_factory=list)  # EnaMessage names, in order of first appearance
    queues: set[int] = field(default_factory=set)
    napi_cpus: set[int] = field(default_factory=set)
    lines: int = 0
    samples: list[str] = field(default_factory=list)

    @property
    def reset(self) -> bool:
        """Whether the device was reset (decided, started or finished), not only troubled."""
        return any(role in self.roles for role in RESET_ROLES)

    @property
    def completed(self) -> bool:
        return RESET_DONE in self.roles

    @property
    def causes(self) -> list[str]:
        """What led to the reset (tx-timeout, tx-paused, napi-starved, device-health, bad-descriptor),
        in order."""
        return [role for role in self.roles if role not in RESET_ROLES]

    def takes(self, message: EnaMessage, usec: int, gap_usec: int) -> bool:
        """Whether a line of ``message`` at ``usec`` belongs to this episode (see the module docstring)."""
        if usec - self.last_usec > gap_usec or RESET_DONE in self.roles:
            return False
        if RESET_STARTED in self.roles or RESET_FAILED in self.roles:
            return message.role in (RESET_DONE, RESET_FAILED)
        return True

    def add(self, message: EnaMessage, usec: int, text: str, samples: int) -> None:
        self.last_usec = max(self.last_usec, usec)
        self.lines += 1
        if message.role not in self.roles:
            self.roles.append(message.role)
        if message.decides and RESET_DECIDED not in self.roles:
            self.roles.append(RESET_DECIDED)
        if message.name not in self.wordings:
            self.wordings.append(message.name)
        for where, into in ((message.qid, self.queues), (message.cpu, self.napi_cpus)):
            number = _number(where, text)
            if number is not None:
                into.add(number)
        if len(self.samples) < samples:
            self.samples.append(sample_text(text))


@dataclass
class EnaReport:
    episodes: list[EnaEpisode]  # ordered by boot (first seen), then time
    scan: JournalScan

    def resets(self) -> list[EnaEpisode]:
        return [e for e in self.episodes if e.reset]


def _number(pattern: Pattern | None, text: str) -> int | None:
    """The last run of digits in ``pattern``'s match in ``text`` (at most 9 of them), or None."""
    found = pattern.search(text) if pattern is not None else None
    runs = re.findall(r"\d+", found.group()) if found is not None else []
    return int(runs[-1]) if runs and len(runs[-1]) <= 9 else None


def classify(text: str) -> EnaMessage | None:
    """The reset-path wording ``text`` is, or None (the first match in table order)."""
    for message in ENA_RESET_PATH:
        if message.regex.search(text) is not None:
            return message
    return None


def device_of(text: str) -> str:
    """The PCI address a driver line names ("ena 0000:00:05.0 eth0: ..."), or ``UNKNOWN_DEVICE``."""
    found = ENA_DEVICE.search(text)
    return found.group().split()[-1] if found is not None else UNKNOWN_DEVICE


def analyze_ena_resets(journal: Journal, *, gap: float = DEFAULT_GAP, samples: int = 3) -> EnaReport:
    """The ENA reset episodes of the journal's kernel messages (``_TRANSPORT=kernel``, via the index)."""
    gap_usec = int(gap * 1_000_000)
    lines: list[tuple[str, int, str, EnaMessage]] = []
    boots: dict[str, int] = {}  # boot id -> order of first appearance
    for entry in journal.match(KERNEL, fields={"MESSAGE"}):
        value = entry.get("MESSAGE")
        text = first_text(value) if isinstance(value, str | bytes | list) else None
        message = classify(text) if text is not None and ENA_ANY.search(text) is not None else None
        if text is None or message is None:
            continue
        boot = str(entry["_BOOT_ID"])
        boots.setdefault(boot, len(boots))
        lines.append((boot, int(entry["__REALTIME_TIMESTAMP"]), text, message))  # type: ignore[call-overload]
    lines.sort(key=lambda line: (boots[line[0]], line[1]))
    episodes: list[EnaEpisode] = []
    open_episode: dict[tuple[str, str], EnaEpisode] = {}
    for boot, usec, text, message in lines:
        key = (boot, device_of(text))
        episode = open_episode.get(key)
        if episode is None or not episode.takes(message, usec, gap_usec):
            episode = open_episode[key] = EnaEpisode(boot, key[1], usec, usec)
            episodes.append(episode)
        episode.add(message, usec, text, samples)
    return EnaReport(episodes, journal.scan)
