"""EBS snapshot blocks kept on disk between runs, so a release gate reads the last release's blocks once.

A snapshot never changes, so one of its 512 KiB blocks is named for good by the region, the snapshot
id and the block index. ``imagelint diff`` keeps here every block a snapshot's walk needed (OLD's and
NEW's: today's NEW is tomorrow's OLD) and serves them back instead of calling ``GetSnapshotBlock``
(:class:`imagelint.aws.ebs_reuse.KeptBlocks`).

- Where: ``$XDG_CACHE_HOME/imagelint/blocks`` (``~/.cache/imagelint/blocks``);
  ``IMAGELINT_NO_CACHE`` turns it off with the audit cache (:mod:`imagelint.cachefiles`).
- One file per block, named by the SHA-256 of its key, holding the key, the block's SHA-256 (the
  checksum ``GetSnapshotBlock`` gave and :func:`imagelint.aws.ebs_api.verified` checked) and the
  data; written atomically (temporary file, rename) under the directory's lock. Not flushed to disk
  block by block: a file a crash left short or torn fails its checksum.
- A cache is never a reason to fail or to change an answer: a file that names another key, is not
  one block long or whose data does not match its checksum is a miss (and removed); a block of
  another snapshot is never served, whatever its data. A directory that cannot be written turns the
  store off for the run, with one warning line.
- Bounded: :data:`MAX_BYTES` in all (least recently used out; a hit touches its file), pruned every
  :data:`PRUNE_EVERY` bytes written and when a read is done (:meth:`BlockStore.prune`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from imagelint import stderr
from imagelint.aws.ebs_api import BLOCK_SIZE
from imagelint.cachefiles import cache_root, locked, prune, write_atomic

MAGIC = b"imagelint-ebs-block 1\n"
MAX_BYTES = 2 * 1024**3
MAX_FILES = MAX_BYTES // BLOCK_SIZE + 16
PRUNE_EVERY = 64 * 1024 * 1024
SUFFIX = ".blk"


class BlockStore:
    """Blocks by (region, snapshot id, index), in :func:`cache_root` ``("blocks")``; thread-safe."""

    def __init__(self, directory: Path | None = None, *, max_bytes: int | None = None) -> None:
        self.directory = directory if directory is not None else cache_root("blocks")
        self.max_bytes = MAX_BYTES if max_bytes is None else max_bytes
        self._lock = threading.Lock()
        self._written = 0

    @staticmethod
    def key(region: str, snapshot_id: str, index: int) -> str:
        return f"{region}:{snapshot_id}:{index}"

    def _path(self, key: str) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / (hashlib.sha256(key.encode()).hexdigest() + SUFFIX)

    def get(self, region: str, snapshot_id: str, index: int) -> bytes | None:
        """The block kept under that name, its checksum verified; None (a miss) otherwise."""
        key = self.key(region, snapshot_id, index)
        path = self._path(key)
        if path is None:
            return None
        header = MAGIC + key.encode() + b"\n"
        try:
            with path.open("rb") as f:
                raw = f.read(len(header) + 65 + BLOCK_SIZE + 1)
        except FileNotFoundError:
            return None
        except OSError:
            raw = b""
        digest, data = raw[len(header) : len(header) + 64], raw[len(header) + 65 :]
        if (
            not raw.startswith(header)
            or raw[len(header) + 64 : len(header) + 65] != b"\n"
            or len(data) != BLOCK_SIZE
            or hashlib.sha256(data).hexdigest().encode() != digest
        ):
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used
        return data

    def put(self, region: str, snapshot_id: str, index: int, data: bytes) -> None:
        """Keep a verified block (atomically); the store is turned off for the run if it cannot be
        written, with one warning."""
        key = self.key(region, snapshot_id, index)
        path = self._path(key)
        if path is None or len(data) != BLOCK_SIZE:
            return
        entry = MAGIC + key.encode() + b"\n" + hashlib.sha256(data).hexdigest().encode() + b"\n" + data
        assert self.directory is not None
        try:
            with locked(self.directory):
                write_atomic(path, entry, sync=False)
        except OSError as exc:
            self._off(exc)
            return
        with self._lock:
            self._written += len(entry)
            due = self._written >= PRUNE_EVERY
            if due:
                self._written = 0
        if due:
            self.prune()

    def prune(self) -> None:
        """The least recently used blocks out, down to the bound."""
        if self.directory is None or not self.directory.is_dir():
            return
        try:
            with locked(self.directory):
                prune(self.directory, "*" + SUFFIX, max_files=MAX_FILES, max_bytes=self.max_bytes)
        except OSError as exc:
            self._off(exc)

    def _off(self, exc: OSError) -> None:
        with self._lock:
            directory, self.directory = self.directory, None
        if directory is not None:
            stderr.warning(
                f"block store {directory}: not written ({exc.strerror or exc}); going on without it"
            )


@dataclass(frozen=True)
class StoredBlocks:
    """One snapshot's blocks in a :class:`BlockStore`."""

    store: BlockStore
    region: str
    snapshot_id: str

    def get(self, index: int) -> bytes | None:
        return self.store.get(self.region, self.snapshot_id, index)

    def put(self, index: int, data: bytes) -> None:
        self.store.put(self.region, self.snapshot_id, index, data)
