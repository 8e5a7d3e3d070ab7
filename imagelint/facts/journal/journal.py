"""Several journal files read as one stream, in the order journalctl shows them.

Ordering follows sd-journal's rule for comparing two entries: the same ``seqnum_id`` compares by
sequence number; otherwise the same boot compares by monotonic time; otherwise by wall-clock
time; and finally by the entry's ``xor_hash``. Entries that compare equal in every respect (the
same entry kept in two files) are shown once. Because that rule is not a total order, the merge
works as sd-journal does rather than with a heap: after each entry every file skips to its first
entry beyond it, and the smallest of those comes next. The common case, one writer's rotated files
(cleanly closed, one seqnum id, disjoint seqnum ranges), is read file after file with no merging.

Problems in one file are recorded in its ``FileReport`` and the other files go on being read, and
every entry a reading method decodes is accounted for there (``FileReport.examined``), as read by
index (``match``, ``match_any_decoded``, ``tail_messages``) or by scan (``entries``).

Before a file is first read (by any of the reading methods), its structure is checked
(``JournalFile.check_structure``: header, tail object, the global entry-array chain and the last
entries' headers). Indexed lookups visit only the entries they match, so a torn file (a snapshot of
a running system whose last entries were never completed, or overwritten) would otherwise read as
complete: a file failing the check is recorded as read in part, which makes the rules relying on it
inconclusive, while what can be read still is.

A file can also be cut while it is read. A read past its new end is a problem on the file
(``FileShrank``); and when a reading method has gone through every file, each is asked whether it
still has the size it had when opened, so a cut that only spared the pages already read (and cached)
is a problem too: the file is no longer what was read.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import field

from imagelint.facts.journal.errors import CorruptJournal
from imagelint.facts.journal.scan import FileReport, FileStatus, JournalScan
from imagelint.records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:  # ``typing`` costs milliseconds to import and is needed for annotations only
    from typing import Any, TypeVar

    # the reader is imported with the first file opened (sources): an image without a journal never is
    from imagelint.facts.journal.reader import Entry, EntryKey, JournalFile, Value

    T = TypeVar("T")
    Matches = Mapping[str, Value | Sequence[Value]]

_MESSAGE = frozenset({"MESSAGE"})


SAMPLE_MAX = 4096
"""Characters of a message kept as a sample (a field can hold megabytes; a sample is evidence)."""


def sample_text(message: str) -> str:
    """``message`` as a sample: cut to ``SAMPLE_MAX`` characters, with an ellipsis when cut."""
    return message if len(message) <= SAMPLE_MAX else message[: SAMPLE_MAX - 1] + "…"


def compare_keys(a: EntryKey, b: EntryKey) -> int:
    """sd-journal's ordering of two entries: negative, zero (the same entry) or positive."""
    if a == b:
        return 0
    if a[0] == b[0] and a[1] != b[1]:
        return -1 if a[1] < b[1] else 1
    if a[2] == b[2] and a[3] != b[3]:
        return -1 if a[3] < b[3] else 1
    if a[4] != b[4]:
        return -1 if a[4] < b[4] else 1
    if a[5] != b[5]:
        return -1 if a[5] < b[5] else 1
    return 0


@dataclass
class _Head:
    jf: JournalFile
    report: FileReport
    offsets: Iterator[int]
    off: int = 0
    key: EntryKey = field(default=(b"", 0, b"", 0, 0, 0))

    def advance(self) -> bool:
        """Move to the next readable entry; False when the file is exhausted or broken."""
        while True:
            try:
                self.off = next(self.offsets)
            except StopIteration:
                return False
            except CorruptJournal as exc:
                self.report.problem(f"entry list cut short: {exc}")
                return False
            try:
                self.key = self.jf.entry_key(self.off)
            except CorruptJournal as exc:
                self.report.problem(f"unreadable entry: {exc}")
                continue
            return True


class Journal:
    """The readable journal files of one source plus the ``JournalScan`` accounting for all of them."""

    def __init__(self, files: list[tuple[FileReport, JournalFile]], scan: JournalScan) -> None:
        self._files = files
        self.scan = scan
        self._checked = False
        self._shrunk: set[int] = set()  # files already recorded as cut (by ``id`` of their report)

    def check(self) -> None:
        """Check every file's structure once, recording a torn or damaged one as read in part.

        Every reading method calls this first; the analyses therefore never count a file as read in
        full when its index could hide the damage.
        """
        if self._checked:
            return
        self._checked = True
        for report, jf in self._files:
            if report.status is not FileStatus.READ:
                continue  # already known to be incomplete (truncated)
            reason = jf.check_structure()
            if reason is not None:
                report.problem(f"torn or damaged: {reason}")

    def _still_whole(self) -> None:
        """Record, once per file, a file that is shorter now than when it was opened."""
        for report, jf in self._files:
            if id(report) not in self._shrunk and jf.shrank():
                self._shrunk.add(id(report))
                report.problem(f"the file shrank while being read (it was {jf.file_size} bytes)")

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for _report, jf in self._files:
            jf.close()
        self._files = []

    @property
    def files(self) -> list[JournalFile]:
        return [jf for _r, jf in self._files]

    def entries(self, fields: Collection[str] | None = None) -> Iterator[Entry]:
        """Every entry of every readable file, interleaved in journalctl's order."""
        return self._stream(lambda jf: jf.entry_offsets(), fields, by_scan=True)

    def match(self, matches: Matches, fields: Collection[str] | None = None) -> Iterator[Entry]:
        """Entries matching ``matches`` (same field: OR; different fields: AND), via each file's index."""
        return self._stream(lambda jf: iter(jf.match_offsets(matches)), fields, by_scan=False)

    @staticmethod
    def _alternatives(
        alternatives: Sequence[Matches | tuple[Matches, Collection[str]]],
    ) -> Callable[[JournalFile], list[int]]:
        """Per file: the sorted offsets matching any alternative (each distinct one looked up once)."""
        distinct: list[tuple[Matches, Collection[str]]] = []
        for alt in alternatives:
            pair = (alt[0], tuple(alt[1])) if isinstance(alt, tuple) else (alt, ())
            if pair not in distinct:
                distinct.append(pair)

        def offsets(jf: JournalFile) -> list[int]:
            found: set[int] = set()
            for matches, without in distinct:
                found.update(jf.match_offsets(matches, without))
            return sorted(found)

        return offsets

    def _chain_order(self) -> list[tuple[FileReport, JournalFile]] | None:
        """The files in reading order when they can simply be read one after another.

        That holds when every file is closed cleanly (offline or archived, not truncated, so its
        header's seqnum range is final), all share one seqnum id, and the ranges do not overlap:
        the usual case of one writer's rotated files. Otherwise None, and entries are merged.
        """
        if len(self._files) < 2:
            return list(self._files)
        for _r, jf in self._files:
            if jf.header.state_name not in ("offline", "archived") or jf.truncated:
                return None
        files = [(r, jf) for r, jf in self._files if jf.header.n_entries]
        if any(jf.header.seqnum_id != files[0][1].header.seqnum_id for _r, jf in files):
            return None
        files.sort(key=lambda f: f[1].header.head_entry_seqnum)
        for (_a, a), (_b, b) in itertools.pairwise(files):
            if not a.header.tail_entry_seqnum < b.header.head_entry_seqnum:
                return None
        return files

    def match_any_decoded(
        self,
        alternatives: Sequence[Matches | tuple[Matches, Collection[str]]],
        decode: Callable[[JournalFile, int], T],
    ) -> Iterator[T]:
        """Entries matching at least one of several match sets (journalctl's ``+``), each once, as
        whatever ``decode(file, offset)`` makes of them.

        For analyses that need less than an entry dict (``JournalFile.fields_at``) or decide per
        entry which fields to read. ``decode`` may raise ``CorruptJournal``, which is accounted for
        against the file as for any unreadable entry.
        """
        return self._stream(self._alternatives(alternatives), None, by_scan=False, decode=decode)

    def _stream(
        self,
        offsets_of: Callable[[JournalFile], Iterable[int]],
        fields: Collection[str] | None,
        *,
        by_scan: bool,
        decode: Callable[[JournalFile, int], Any] | None = None,
    ) -> Iterator[Any]:
        yield from self._read(offsets_of, fields, by_scan=by_scan, decode=decode)
        self._still_whole()

    def _read(
        self,
        offsets_of: Callable[[JournalFile], Iterable[int]],
        fields: Collection[str] | None,
        *,
        by_scan: bool,
        decode: Callable[[JournalFile, int], Any] | None,
    ) -> Iterator[Any]:
        self.check()
        chain = self._chain_order()
        if chain is not None:
            for report, jf in chain:
                try:
                    offsets = iter(offsets_of(jf))
                    first = next(offsets, None)
                except CorruptJournal as exc:
                    report.problem(f"index lookup failed: {exc}")
                    continue
                if first is not None:
                    yield from self._drain(_Head(jf, report, offsets, first), fields, by_scan, decode)
            return
        heads: list[_Head] = []
        for report, jf in self._files:
            try:
                offsets = iter(offsets_of(jf))
            except CorruptJournal as exc:
                report.problem(f"index lookup failed: {exc}")
                continue
            head = _Head(jf, report, offsets)
            if head.advance():
                heads.append(head)
        if len(heads) == 1:
            yield from self._drain(heads[0], fields, by_scan, decode)
            return
        last: EntryKey | None = None
        while heads:
            if last is not None:
                # as in sd-journal, each file offers only its next entry *beyond* the last one shown,
                # so an entry kept in two files (equal in all but seqnum id) is shown once
                for h in list(heads):
                    while compare_keys(h.key, last) <= 0:
                        if not h.advance():
                            heads.remove(h)
                            break
            if not heads:
                return
            if len(heads) == 1:
                yield from self._drain(heads[0], fields, by_scan, decode)
                return
            best = heads[0]
            for h in heads[1:]:
                if compare_keys(h.key, best.key) < 0:
                    best = h
            try:
                entry = best.jf.entry(best.off, fields) if decode is None else decode(best.jf, best.off)
            except CorruptJournal as exc:
                best.report.problem(f"unreadable entry: {exc}")
            else:
                best.report.examined(best.off, by_scan=by_scan)
                yield entry
            last = best.key
            if not best.advance():
                heads.remove(best)

    @staticmethod
    def _drain(
        head: _Head,
        fields: Collection[str] | None,
        by_scan: bool,
        decode: Callable[[JournalFile, int], Any] | None,
    ) -> Iterator[Any]:
        jf, report = head.jf, head.report
        examined = report.examined
        entry: Callable[[int, Collection[str] | None], Any]
        if decode is None:
            entry = jf.entry
        else:

            def entry(off: int, _fields: Collection[str] | None) -> Any:
                return decode(jf, off)

        off = head.off
        offsets = head.offsets
        while True:
            try:
                e = entry(off, fields)
            except CorruptJournal as exc:
                report.problem(f"unreadable entry: {exc}")
            else:
                examined(off, by_scan=by_scan)  # before the yield: a reader may stop at any entry
                yield e
            try:
                off = next(offsets)
            except StopIteration:
                return
            except CorruptJournal as exc:
                report.problem(f"entry list cut short: {exc}")
                return

    def tail_messages(
        self, matches: Matches, boots: Collection[str], k: int, *, max_decodes: int = 40
    ) -> dict[str, list[str]]:
        """Per boot in ``boots``: the last ``k`` distinct MESSAGEs of entries matching ``matches``.

        Walks each file's matches backwards reading only entry headers, and decodes at most
        ``max_decodes`` entries per boot, so a chatty unit costs little.
        """
        self.check()
        want = {bytes.fromhex(b): b for b in boots}
        found: dict[str, list[tuple[int, str]]] = {b: [] for b in boots}
        chain = self._chain_order()
        # one writer's files newest first: a boot's last entries are met first and its budget holds
        # across files; otherwise each file may spend the budget on its own
        files = list(reversed(chain)) if chain is not None else self._files
        decodes: dict[str, int] = dict.fromkeys(boots, 0)
        for report, jf in files:
            if chain is None:
                decodes = dict.fromkeys(boots, 0)
            elif all(n >= max_decodes for n in decodes.values()):
                break
            try:
                offsets = jf.match_offsets(matches)
                for off in reversed(offsets):
                    boot_raw, t = jf.entry_boot_and_time(off)
                    boot = want.get(boot_raw)
                    if boot is None or decodes[boot] >= max_decodes:
                        continue
                    decodes[boot] += 1
                    _b, _t, fields = jf.fields_at(off, _MESSAGE)
                    report.examined(off, by_scan=False)
                    msg = fields.get("MESSAGE")
                    if isinstance(msg, list):
                        msg = msg[0]
                    if isinstance(msg, bytes):
                        msg = msg.decode("utf-8", "replace")
                    if isinstance(msg, str):
                        found[boot].append((t, sample_text(msg)))
                    if all(n >= max_decodes for n in decodes.values()):
                        break
            except CorruptJournal as exc:
                report.problem(f"index lookup failed: {exc}")
        self._still_whole()
        out: dict[str, list[str]] = {}
        for boot, items in found.items():
            items.sort(reverse=True)
            distinct: list[str] = []
            for _t, msg in items:
                if msg not in distinct:
                    distinct.append(msg)
                if len(distinct) == k:
                    break
            out[boot] = distinct
        return out
