"""The audits of immutable images, kept between runs: a release gate diffs against the last release
without reading it again.

An EBS snapshot never changes, so its audit is a function of the snapshot, the imagelint version and
the rules and config it ran with; :func:`imagelint.commands.diff.load_side` makes that the key (what
an opener names as immutable, plus the run's hash) and keeps the audit's JSON report here. Nothing
else is cached: a directory, a disk image file or a bundle may change under the same name.

- Where: ``$XDG_CACHE_HOME/imagelint/audits`` (``~/.cache/imagelint/audits`` without it).
  ``IMAGELINT_NO_CACHE`` set to anything but empty or ``0`` turns the cache off.
- Writes are atomic: a temporary file in the same directory, flushed and renamed into place, under
  an exclusive lock on ``.lock`` that also covers the pruning; a reader never sees half a file
  (:mod:`imagelint.cachefiles`, shared with the EBS block store).
- Bounded: at most :data:`MAX_ENTRIES` files and :data:`MAX_BYTES` in all, least recently used
  first out (a hit touches its file); an entry larger than :data:`MAX_ENTRY_BYTES` is not kept.
- A cache is never a reason to fail or to change an answer: an entry that cannot be read, is not
  JSON or names another key is a miss (and removed); :meth:`AuditCache.put` raises the ``OSError``
  of a directory that cannot be written, and the command says so in one warning line and goes on.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from imagelint.cachefiles import cache_root, locked, prune, write_atomic

MAX_ENTRIES = 64
MAX_BYTES = 128 * 1024 * 1024
MAX_ENTRY_BYTES = 16 * 1024 * 1024


def cache_dir() -> Path | None:
    """Where audits are kept; None when the cache is turned off."""
    return cache_root("audits")


class AuditCache:
    """Audit reports (JSON) by key, in :func:`cache_dir`."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory if directory is not None else cache_dir()

    def _path(self, key: str) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / (hashlib.sha256(key.encode()).hexdigest() + ".json")

    def get(self, key: str) -> dict[str, Any] | None:
        """The document kept under ``key``, or None."""
        path = self._path(key)
        if path is None:
            return None
        try:
            with path.open("rb") as f:
                raw = f.read(MAX_ENTRY_BYTES + 1)
            entry = json.loads(raw) if len(raw) <= MAX_ENTRY_BYTES else None
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            entry = None
        if (
            not isinstance(entry, dict)
            or entry.get("key") != key
            or not isinstance(entry.get("document"), dict)
        ):
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used
        document: dict[str, Any] = entry["document"]
        return document

    def put(self, key: str, document: dict[str, Any]) -> None:
        """Keep ``document`` under ``key`` (atomically; the oldest entries go past the bounds)."""
        path = self._path(key)
        if path is None:
            return
        data = json.dumps({"key": key, "document": document}, sort_keys=True).encode()
        if len(data) > MAX_ENTRY_BYTES:
            return
        assert self.directory is not None
        with locked(self.directory):
            write_atomic(path, data)
            prune(self.directory, "*.json", max_files=MAX_ENTRIES, max_bytes=MAX_BYTES)
