"""Why a journal file, or part of one, could not be read.

Two kinds of problem, and the caller must tell them apart: a file this reader refuses as a whole
(``UnsupportedJournal``: unknown incompatible flag, unknown header layout) and a file whose
structure is broken (``CorruptJournal``: bad offsets, wrong object types, truncation, loops, a
payload that does not match its stored hash: ``HashMismatch``).
Both carry a one-line reason fit for a report.
"""

from __future__ import annotations


class JournalError(Exception):
    """A journal file, or a part of it, cannot be read."""

    def __init__(self, reason: str, *, offset: int | None = None) -> None:
        super().__init__(reason if offset is None else f"{reason} (at offset {offset:#x})")
        self.reason = reason
        self.offset = offset


class UnsupportedJournal(JournalError):
    """The file uses a feature this reader does not know; it must not be read at all."""


class CorruptJournal(JournalError):
    """The file's structure is inconsistent (truncated, overwritten, or still being written)."""


class HashMismatch(CorruptJournal):
    """An object's payload does not hash to the value stored with it: its bytes changed after they
    were written (a flipped bit, an overwrite). Damage to data a read needs, never a value to use."""


class FileShrank(CorruptJournal):
    """The file got shorter while it was read (truncated under the reader): what is past the new end
    is gone, so the read is incomplete; the file may be whole again later (see
    :mod:`imagelint.probes.journal`)."""
