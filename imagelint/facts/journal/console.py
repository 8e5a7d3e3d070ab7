"""A serial console's kernel lines, read as a journal of one boot: the journal's signals judge them.

A machine's console (QEMU's serial port, EC2's ``GetConsoleOutput``) carries the kernel's printk lines
as they are printed, including the ones no journal keeps: before journald starts, after the machine
stops answering, in a boot that never reaches a shell. :func:`open_console` makes those lines a
journal with the interface the analyses read (``match``, ``entries``, ``scan``), so ENA resets, soft
lockups, RCU stalls, hung tasks and OOM kills on the console are found by the same specs and code
(:mod:`.signals`, :mod:`.ena`) as in a journal file, never by a second set of patterns.

A kernel line is one that starts with the printk time (``[   12.345678] ``, printed when
``CONFIG_PRINTK_TIME`` is set or ``printk.time=1``, the default of the distribution kernels); each is
an entry with ``_TRANSPORT=kernel``, its text after the time as ``MESSAGE`` and its time as the power-on
wall time plus the printk time. Other lines (systemd's status, getty, cloud-init) are not kernel lines
and are not entries. The console is the image's text: terminal escapes and carriage returns are
removed before a line is read, invalid UTF-8 is replaced, and a line is cut at :data:`LINE_MAX` bytes.
The printk time going backwards starts a new boot (a reset the machine did not stop at).

The caller bounds what it keeps (:class:`ConsoleLog`): lines it had to drop are a problem of the
source, so the rules that read it are inconclusive rather than passing on what is left.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping, Sequence

from imagelint.facts.journal.entries import Entry
from imagelint.facts.journal.objects import Value
from imagelint.facts.journal.scan import FileReport, JournalScan
from imagelint.records import dataclass

LINE_MAX = 4096
SOURCE = "console"
_PRINTK = re.compile(rb"\A(?:<\d{1,3}>)?\[ {0,12}(\d{1,10})\.(\d{6})\] ?")
# CSI (ESC [ ... final byte), OSC (ESC ] ... BEL or ESC \), and any other two-byte escape
_ESCAPE = re.compile(rb"\x1b(?:\[[0-?]{0,64}[ -/]{0,8}[@-~]|\][^\x07\x1b]{0,256}(?:\x07|\x1b\\)?|[@-_])")


@dataclass(frozen=True)
class ConsoleLog:
    """What a console reader kept: its lines (raw, as printed), how many it dropped, when it began."""

    lines: tuple[bytes, ...]
    dropped: int = 0  # lines not kept (over the reader's budget): the source is read in part
    powered_on_usec: int = 0  # wall time of power-on, microseconds since the epoch
    source: str = SOURCE


def clean(line: bytes) -> bytes:
    """``line`` without terminal escapes and carriage returns, cut at :data:`LINE_MAX` bytes."""
    return _ESCAPE.sub(b"", line[: LINE_MAX * 2]).replace(b"\r", b"")[:LINE_MAX]


def kernel_line(line: bytes) -> tuple[int, str] | None:
    """(printk time in microseconds, message) of a kernel line; None for any other line."""
    text = clean(line)
    found = _PRINTK.match(text)
    if found is None:
        return None
    usec = int(found.group(1)) * 1_000_000 + int(found.group(2))
    return usec, text[found.end() :].decode("utf-8", "replace")


class ConsoleScan(JournalScan):
    """The account of a console read as a journal: its kernel lines, not journal files."""

    def note(self) -> str:
        from imagelint.targets.rootfs import human_size

        lines = sum(f.n_entries or 0 for f in self.files)
        text = f"{lines:,} kernel lines on the {self.source} ({human_size(self.bytes_read)} kept)"
        return f"{text}, {self.entries_examined:,} examined, problems: {self.problems:,}"


class ConsoleJournal:
    """The kernel lines of a :class:`ConsoleLog` as journal entries (the subset of
    :class:`~imagelint.facts.journal.journal.Journal` the analyses use)."""

    def __init__(self, log: ConsoleLog) -> None:
        report = FileReport(log.source, size=sum(len(line) for line in log.lines))
        self.scan = ConsoleScan(log.source, searched=[log.source], existing=[log.source], files=[report])
        self._report = report
        self._entries: list[Entry] = []
        boot, last = 1, -1
        for line in log.lines:
            parsed = kernel_line(line)
            if parsed is None:
                continue
            usec, message = parsed
            if usec < last:
                boot += 1
            last = usec
            self._entries.append(
                {
                    "__REALTIME_TIMESTAMP": log.powered_on_usec + usec,
                    "__MONOTONIC_TIMESTAMP": usec,
                    "_BOOT_ID": log.source if boot == 1 else f"{log.source}-{boot}",
                    "_TRANSPORT": "kernel",
                    "MESSAGE": message,
                }
            )
        report.n_entries = len(self._entries)
        if log.dropped:
            report.problem(f"{log.dropped:,} console lines over the reader's budget were not kept")

    def __enter__(self) -> ConsoleJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def entries(self, fields: Collection[str] | None = None) -> Iterator[Entry]:
        """Every kernel line's entry, in the console's order."""
        for offset, entry in enumerate(self._entries):
            self._report.examined(offset << 3, by_scan=True)
            yield dict(entry)

    def match(
        self, matches: Mapping[str, Value | Sequence[Value]], fields: Collection[str] | None = None
    ) -> Iterator[Entry]:
        """Entries whose fields hold the matched values (same field: OR; different fields: AND)."""
        for offset, entry in enumerate(self._entries):
            if all(_holds(entry.get(name), wanted) for name, wanted in matches.items()):
                self._report.examined(offset << 3, by_scan=False)
                yield dict(entry)


def _holds(value: object, wanted: Value | Sequence[Value]) -> bool:
    options = wanted if isinstance(wanted, list | tuple) else (wanted,)
    return any(value == (w.decode("utf-8", "replace") if isinstance(w, bytes) else w) for w in options)


def open_console(log: ConsoleLog) -> ConsoleJournal:
    return ConsoleJournal(log)
