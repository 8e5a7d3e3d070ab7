"""Reading systemd journal files without systemd: a pure-Python reader and the analyses built on it.

Public API (what the rule layer calls):

* sources: ``open_image(target)``, ``open_directory(path)``, ``open_files(paths)``, ``open_path(path)``
  each return a ``Journal`` (a context manager) whose ``scan`` (``JournalScan``) accounts for every
  file found: read, read in part, or skipped with a reason.
* reading: ``Journal.entries(fields=None)`` and ``Journal.match({"FIELD": value or [values]},
  fields=None)`` yield entries as dicts in journalctl's order (see ``reader``);
  ``Journal.match_any_decoded([...], decode)`` decodes the entries of several match sets.
* analyses: ``analyze_restarts(journal) -> RestartReport`` and ``count_signal(journal, spec) ->
  SignalReport``, ``analyze_ena_resets(journal) -> EnaReport`` (ENA resets as episodes, ``ena``),
  with the specs, message ids and kernel wordings in ``patterns``.

Every file is structure-checked before its first read (a torn or damaged one is *read in part*), and
every size a file claims is bounded (values over 16 MiB uncompressed, decompression bombs, absurd
counts and offsets are problems on the entry or file, never allocations); problems are recorded in
the scan, and no reading method raises for a damaged file.

Entry dicts map field names to ``str`` (valid UTF-8) or ``bytes`` (anything else), or to a list of
those, in entry order, when a field repeats. Metadata keys: ``__REALTIME_TIMESTAMP``,
``__MONOTONIC_TIMESTAMP``, ``__SEQNUM`` (ints, microseconds / sequence number), ``_BOOT_ID``,
``__SEQNUM_ID`` (hex strings) and ``__CURSOR`` (journalctl's cursor string). Unlike ``journalctl -o
json``, values are never nulled for size and control characters stay in strings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagelint import lazy

if TYPE_CHECKING:
    from imagelint.facts.journal.ena import EnaEpisode, EnaReport, analyze_ena_resets
    from imagelint.facts.journal.errors import CorruptJournal, JournalError, UnsupportedJournal
    from imagelint.facts.journal.journal import Journal, compare_keys
    from imagelint.facts.journal.patterns import SIGNALS, SignalSpec
    from imagelint.facts.journal.reader import META_FIELDS, Entry, JournalFile
    from imagelint.facts.journal.restarts import ExitStatus, RestartReport, UnitRestarts, analyze_restarts
    from imagelint.facts.journal.scan import FileReport, FileStatus, JournalScan
    from imagelint.facts.journal.signals import SignalBoot, SignalReport, count_signal
    from imagelint.facts.journal.sources import (
        IMAGE_JOURNAL_DIRS,
        JournalRequest,
        image_journal_files,
        open_directory,
        open_files,
        open_image,
        open_path,
    )

__all__ = [
    "IMAGE_JOURNAL_DIRS",
    "META_FIELDS",
    "SIGNALS",
    "CorruptJournal",
    "EnaEpisode",
    "EnaReport",
    "Entry",
    "ExitStatus",
    "FileReport",
    "FileStatus",
    "Journal",
    "JournalError",
    "JournalFile",
    "JournalRequest",
    "JournalScan",
    "RestartReport",
    "SignalBoot",
    "SignalReport",
    "SignalSpec",
    "UnitRestarts",
    "UnsupportedJournal",
    "analyze_ena_resets",
    "analyze_restarts",
    "compare_keys",
    "count_signal",
    "image_journal_files",
    "open_directory",
    "open_files",
    "open_image",
    "open_path",
]
# Imported on first use (imagelint.lazy): an audit of an image without a journal opens none and
# never loads the analyses and their compiled kernel wordings (ena, patterns, restarts, signals).
__getattr__ = lazy.exports(
    __name__,
    {
        "ena": ("EnaEpisode", "EnaReport", "analyze_ena_resets"),
        "errors": ("CorruptJournal", "JournalError", "UnsupportedJournal"),
        "journal": ("Journal", "compare_keys"),
        "patterns": ("SIGNALS", "SignalSpec"),
        "reader": ("META_FIELDS", "Entry", "JournalFile"),
        "restarts": ("ExitStatus", "RestartReport", "UnitRestarts", "analyze_restarts"),
        "scan": ("FileReport", "FileStatus", "JournalScan"),
        "signals": ("SignalBoot", "SignalReport", "count_signal"),
        "sources": (
            "IMAGE_JOURNAL_DIRS",
            "JournalRequest",
            "image_journal_files",
            "open_directory",
            "open_files",
            "open_image",
            "open_path",
        ),
    },
)
