"""The audits of immutable images, kept between runs: a release gate diffs against the last release
without reading it again.

An EBS snapshot never changes, so its audit is a function of the snapshot, the imagelint version and
the rules and config it ran with; :func:`imagelint.commands.diff.load_side` makes that the key (what
an opener names as immutable, plus the run's hash) and keeps the audit's JSON report here. Nothing
else is cached: a directory, a disk image file or a bundle may change under the same name.

- Where: ``$XDG_CACHE_HOME/imagelint/audits`` (``~/.cache/imagelint/audits`` without it).
  ``IMAGELINT_NO_CACHE`` set to anything but empty or ``0`` (or naming ``audits``) turns it off.
- Trusted only when ours (:mod:`imagelint.cachefiles`): an entry is authenticated with this user's
  key on this machine over its key (the snapshot, the imagelint version, the rules and config) and
  its document; a planted, restored, renamed or cut entry is a miss, and the image is read instead.
- Writes are atomic (a temporary file, flushed and renamed into place under the directory's lock,
  which also covers the pruning); a reader never sees half a file.
- Bounded: at most :data:`MAX_ENTRIES` files and :data:`MAX_BYTES` in all, least recently used
  first out (a hit touches its file); an entry larger than :data:`MAX_ENTRY_BYTES` is not kept.
- A cache is never a reason to fail or to change an answer: an entry that cannot be read or
  trusted, is not JSON or names another key is a miss (and removed); :meth:`AuditCache.put` raises
  the ``OSError`` of a directory that cannot be written, and the command says so in one warning
  line and goes on.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from imagelint.cachefiles import CacheDir, cache_root

NAME = "audits"
SUFFIX = ".json"
MAX_ENTRIES = 64
MAX_BYTES = 128 * 1024 * 1024
MAX_ENTRY_BYTES = 16 * 1024 * 1024


def cache_dir() -> Path | None:
    """Where audits are kept; None when the cache is turned off."""
    return cache_root(NAME)


class AuditCache:
    """Audit reports (JSON) by key, in :func:`cache_dir` (or ``directory``); off when it is refused."""

    def __init__(self, directory: Path | None = None) -> None:
        self._store = CacheDir.open(NAME) if directory is None else CacheDir.at(NAME, directory)
        self.directory = None if self._store is None else self._store.path

    @staticmethod
    def entry(key: str) -> str:
        """The file name of the entry kept under ``key``."""
        return hashlib.sha256(key.encode()).hexdigest() + SUFFIX

    def get(self, key: str) -> dict[str, Any] | None:
        """The document kept under ``key``, or None."""
        if self._store is None:
            return None
        raw = self._store.read(self.entry(key), key.encode(), limit=MAX_ENTRY_BYTES)
        try:
            entry = None if raw is None else json.loads(raw)
        except ValueError:
            entry = None
        if (
            not isinstance(entry, dict)
            or entry.get("key") != key
            or not isinstance(entry.get("document"), dict)
        ):
            if raw is not None:
                self._store.remove(self.entry(key))
            return None
        document: dict[str, Any] = entry["document"]
        return document

    def put(self, key: str, document: dict[str, Any]) -> None:
        """Keep ``document`` under ``key`` (atomically; the oldest entries go past the bounds)."""
        if self._store is None:
            return
        data = json.dumps({"key": key, "document": document}, sort_keys=True).encode()
        if len(data) > MAX_ENTRY_BYTES:
            return
        with self._store.locked():
            self._store.write(self.entry(key), data, key.encode(), sync=True)
            self._store.prune(SUFFIX, max_files=MAX_ENTRIES, max_bytes=MAX_BYTES)
