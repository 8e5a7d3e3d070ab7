"""EBS snapshot blocks kept on disk between runs, so a release gate reads the last release's blocks once.

A snapshot never changes, so one of its 512 KiB blocks is named for good by the region, the snapshot
id and the block index. ``imagelint diff`` keeps here every block a snapshot's walk needed (OLD's and
NEW's: today's NEW is tomorrow's OLD) and serves them back instead of calling ``GetSnapshotBlock``
(:class:`imagelint.aws.ebs_reuse.KeptBlocks`).

- Where: ``$XDG_CACHE_HOME/imagelint/blocks`` (``~/.cache/imagelint/blocks``);
  ``IMAGELINT_NO_CACHE`` turns it off with the audit cache (:mod:`imagelint.cachefiles`).
- Content-addressed: a block's data is one ``.blk`` file named by the data's SHA-256 (the checksum
  ``GetSnapshotBlock`` gave and :func:`imagelint.aws.ebs_api.verified` checked), and each name
  (region, snapshot, index) is a small ``.ref`` file, named by the SHA-256 of the name, holding the
  name and the data's SHA-256. A block NEW has unchanged from OLD is OLD's data under a second
  name: keeping it writes a reference, not another 512 KiB. Files are written atomically (temporary
  file, rename) under the directory's lock; not flushed to disk block by block: a file a crash left
  short or torn fails its checksum.
- A snapshot's listing (its volume size and allocated blocks, without the tokens, which expire) is
  kept too, as a ``.lst`` file named by the SHA-256 of the snapshot's name and checksummed like a
  block: a diff whose OLD comes from the caches checks ListChangedBlocks against it instead of
  listing OLD again.
- Written behind (:class:`StoredBlocks`): a snapshot's blocks are held (at most
  :data:`PENDING_BYTES`) and written together under one taking of the lock when the read is over
  (:meth:`StoredBlocks.flush`), not one by one from the threads that fetch them, which would hold
  up the reader behind the lock and the disk; past the bound the thread that puts writes them all.
- A cache is never a reason to fail or to change an answer: a reference that names another key, or
  whose data file is missing, is not one block long or does not match the checksum, is a miss (and
  the bad file removed); a block of another snapshot is never served under this one's name, only
  data whose checksum this snapshot's own block had. A directory that cannot be written turns the
  store off for the run, with one warning line.
- Bounded: :data:`MAX_BYTES` of data in all, :data:`MAX_REFS` references and :data:`MAX_LISTINGS`
  listings (least recently used out; a hit touches its files), pruned every :data:`PRUNE_EVERY`
  bytes written and when a read is done (:meth:`BlockStore.prune`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterable
from pathlib import Path

from imagelint import stderr
from imagelint.aws.ebs_api import BLOCK_SIZE
from imagelint.cachefiles import cache_root, locked, prune, write_atomic

MAGIC = b"imagelint-ebs-block 2\n"  # a data file: this, then the block
REF_MAGIC = b"imagelint-ebs-ref 2\n"  # a reference: this, the key, the data's SHA-256, one a line
MAX_BYTES = 2 * 1024**3
MAX_FILES = MAX_BYTES // BLOCK_SIZE + 16
MAX_REFS = 8 * MAX_FILES  # a block shared by several snapshots has a reference for each
PRUNE_EVERY = 64 * 1024 * 1024
PENDING_BYTES = 64 * 1024 * 1024  # blocks put and not written yet, per snapshot
SUFFIX = ".blk"
REF_SUFFIX = ".ref"
REF_MAX = 512  # a reference file is far shorter: anything longer is not one
LIST_MAGIC = b"imagelint-ebs-listing 2\n"  # a listing: this, the snapshot, SHA-256, the payload
LIST_SUFFIX = ".lst"
MAX_LISTINGS = 1024
MAX_LISTING_BYTES = 2 * 1024 * 1024  # a 64 TiB volume's 131072 blocks take about 1 MiB


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

    @staticmethod
    def _ref_header(key: str) -> bytes:
        """How a reference for ``key`` begins (the data's SHA-256 and a newline follow)."""
        return REF_MAGIC + key.encode() + b"\n"

    @staticmethod
    def _listing_header(region: str, snapshot_id: str) -> bytes:
        """How the listing of a snapshot begins (its payload's SHA-256, a newline and the payload follow)."""
        return LIST_MAGIC + f"{region}:{snapshot_id}".encode() + b"\n"

    def _ref(self, key: str) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / (hashlib.sha256(key.encode()).hexdigest() + REF_SUFFIX)

    def _data(self, digest: str) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / (digest + SUFFIX)

    def get(self, region: str, snapshot_id: str, index: int) -> bytes | None:
        """The block kept under that name, its checksum verified; None (a miss) otherwise."""
        found = self.get_verified(region, snapshot_id, index)
        return None if found is None else found[0]

    def get_verified(self, region: str, snapshot_id: str, index: int) -> tuple[bytes, str] | None:
        """The block kept under that name and its SHA-256 (hex), verified; None (a miss) otherwise."""
        key = self.key(region, snapshot_id, index)
        ref = self._ref(key)
        if ref is None:
            return None
        digest = self._digest(ref, key)
        data_path = self._data(digest) if digest is not None else None
        if digest is None or data_path is None:
            return None
        try:
            with data_path.open("rb") as f:
                magic, data = f.read(len(MAGIC)), f.read(BLOCK_SIZE + 1)  # the data not copied again
        except FileNotFoundError:  # pruned: the reference names nothing now
            magic, data, bad = b"", b"", [ref]
        except OSError:
            magic, data, bad = b"", b"", [ref, data_path]
        else:
            bad = [ref, data_path]
        if magic != MAGIC or len(data) != BLOCK_SIZE or hashlib.sha256(data).hexdigest() != digest:
            for path in bad:
                with contextlib.suppress(OSError):
                    path.unlink()
            return None
        for path in (ref, data_path):
            with contextlib.suppress(OSError):
                os.utime(path)  # recently used (both: a hit keeps the data and this name)
        return data, digest

    @staticmethod
    def _digest(ref: Path, key: str) -> str | None:
        """The data's SHA-256 a reference names, if it is one for ``key`` (a bad one is removed)."""
        try:
            with ref.open("rb") as f:
                raw = f.read(REF_MAX)
        except FileNotFoundError:
            return None
        except OSError:
            raw = b""
        header = BlockStore._ref_header(key)
        digest = raw[len(header) : -1].decode("ascii", "replace")
        if (
            raw.startswith(header)
            and raw.endswith(b"\n")
            and len(digest) == 64
            and all(c in "0123456789abcdef" for c in digest)
        ):
            return digest
        with contextlib.suppress(OSError):
            ref.unlink()
        return None

    def _listing_path(self, region: str, snapshot_id: str) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / (hashlib.sha256(f"{region}:{snapshot_id}".encode()).hexdigest() + LIST_SUFFIX)

    def get_listing(self, region: str, snapshot_id: str) -> tuple[int, frozenset[int]] | None:
        """The snapshot's volume size and allocated blocks, as kept, checksum verified; None (a miss)."""
        path = self._listing_path(region, snapshot_id)
        if path is None:
            return None
        header = self._listing_header(region, snapshot_id)
        try:
            with path.open("rb") as f:
                raw = f.read(len(header) + 65 + MAX_LISTING_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError:
            raw = b""
        digest, payload = raw[len(header) : len(header) + 64], raw[len(header) + 65 :]
        found = None
        if raw.startswith(header) and hashlib.sha256(payload).hexdigest().encode() == digest:
            with contextlib.suppress(ValueError):
                size, _, indexes = payload.decode("ascii").partition("\n")
                found = int(size), frozenset(int(i) for i in indexes.split(",") if i)
        if found is None:
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        with contextlib.suppress(OSError):
            os.utime(path)
        return found

    def put_listing(self, region: str, snapshot_id: str, volume_bytes: int, indexes: Iterable[int]) -> None:
        """Keep a snapshot's listing (atomically; turned off like :meth:`put_all` if it cannot be)."""
        path = self._listing_path(region, snapshot_id)
        payload = f"{volume_bytes}\n{','.join(str(i) for i in sorted(indexes))}".encode()
        if path is None or len(payload) > MAX_LISTING_BYTES:
            return
        header = self._listing_header(region, snapshot_id)
        entry = header + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
        assert self.directory is not None
        try:
            with locked(self.directory):
                write_atomic(path, entry, sync=False)
        except OSError as exc:
            self._off(exc)

    def has(self, region: str, snapshot_id: str, index: int) -> bool:
        """Whether a reference is kept under that name (not read, not verified: a hint, never data)."""
        path = self._ref(self.key(region, snapshot_id, index))
        return path is not None and path.is_file()

    def put(self, region: str, snapshot_id: str, index: int, data: bytes, digest: str | None = None) -> None:
        """Keep a verified block (atomically); the store is turned off for the run if it cannot be
        written, with one warning. ``digest``: its SHA-256 (hex), when the caller knows it."""
        self.put_all(region, snapshot_id, [(index, data, digest)])

    def put_all(self, region: str, snapshot_id: str, blocks: Iterable[tuple[int, bytes, str | None]]) -> None:
        """Keep verified blocks of one snapshot under one taking of the lock: a reference each, and
        the data of those whose content is not kept already (under any name)."""
        entries = []
        for index, data, known in blocks:
            key = self.key(region, snapshot_id, index)
            ref = self._ref(key)
            if ref is not None and len(data) == BLOCK_SIZE:
                digest = known or hashlib.sha256(data).hexdigest()
                entries.append((ref, self._ref_header(key) + digest.encode() + b"\n", digest, data))
        if not entries:
            return
        assert self.directory is not None
        written = 0
        try:
            with locked(self.directory):
                for ref, reference, digest, data in entries:
                    path = self.directory / (digest + SUFFIX)
                    try:
                        os.utime(path)  # the same content is kept: only the new name is written
                    except FileNotFoundError:
                        write_atomic(path, MAGIC + data, sync=False)
                        written += len(MAGIC) + len(data)
                    write_atomic(ref, reference, sync=False)
                    written += len(reference)
        except OSError as exc:
            self._off(exc)
            return
        with self._lock:
            self._written += written
            due = self._written >= PRUNE_EVERY
            if due:
                self._written = 0
        if due:
            self.prune()

    def prune(self) -> None:
        """The least recently used blocks and references out, down to the bounds."""
        if self.directory is None or not self.directory.is_dir():
            return
        try:
            with locked(self.directory):
                prune(self.directory, "*" + SUFFIX, max_files=MAX_FILES, max_bytes=self.max_bytes)
                prune(self.directory, "*" + REF_SUFFIX, max_files=MAX_REFS, max_bytes=MAX_REFS * REF_MAX)
                prune(
                    self.directory,
                    "*" + LIST_SUFFIX,
                    max_files=MAX_LISTINGS,
                    max_bytes=MAX_LISTINGS * MAX_LISTING_BYTES // 8,
                )
        except OSError as exc:
            self._off(exc)

    def _off(self, exc: OSError) -> None:
        with self._lock:
            directory, self.directory = self.directory, None
        if directory is not None:
            stderr.warning(
                f"block store {directory}: not written ({exc.strerror or exc}); going on without it"
            )


class StoredBlocks:
    """One snapshot's blocks in a :class:`BlockStore`: read at once, written behind (thread-safe).

    :meth:`put` holds a block until :meth:`flush` writes every held block at once; when more than
    ``pending_bytes`` are held, the thread that puts writes them (the memory held stays bounded). A
    held block is served by :meth:`get` as a stored one is."""

    def __init__(
        self, store: BlockStore, region: str, snapshot_id: str, *, pending_bytes: int = PENDING_BYTES
    ) -> None:
        self.store = store
        self.region = region
        self.snapshot_id = snapshot_id
        self.pending_bytes = pending_bytes
        self._pending: dict[int, tuple[bytes, str | None]] = {}  # index: (data, its SHA-256 if known)
        self._digests: dict[int, str] = {}  # the SHA-256 of blocks served from the store
        self._held = 0
        self._lock = threading.Lock()
        self._flushing = threading.Lock()  # one flush at a time

    def get(self, index: int) -> bytes | None:
        with self._lock:
            held = self._pending.get(index)
        if held is not None:
            return held[0]
        found = self.store.get_verified(self.region, self.snapshot_id, index)
        if found is None:
            return None
        with self._lock:
            self._digests[index] = found[1]
        return found[0]

    def digest(self, index: int) -> str | None:
        """The SHA-256 (hex) of a block :meth:`get` served from the store, else None."""
        with self._lock:
            return self._digests.get(index)

    def listing(self) -> tuple[int, frozenset[int]] | None:
        """The snapshot's volume size and allocated blocks, if kept (:meth:`BlockStore.get_listing`)."""
        return self.store.get_listing(self.region, self.snapshot_id)

    def keep_listing(self, volume_bytes: int, indexes: Iterable[int]) -> None:
        """Keep the snapshot's listing (written now: one small file, once per read)."""
        self.store.put_listing(self.region, self.snapshot_id, volume_bytes, indexes)

    def has(self, index: int) -> bool:
        """Whether the block is held or kept (:meth:`BlockStore.has`: a hint, not verified)."""
        with self._lock:
            if index in self._pending:
                return True
        return self.store.has(self.region, self.snapshot_id, index)

    def put(self, index: int, data: bytes, digest: str | None = None) -> None:
        """Hold a verified block for :meth:`flush` (``digest``: its SHA-256, when known)."""
        with self._lock:
            if index not in self._pending:
                self._pending[index] = (data, digest)
                self._held += len(data)
            full = self._held > self.pending_bytes
        if full:
            self.flush()

    def flush(self) -> None:
        """Write every held block (a store turned off drops them); served from memory meanwhile."""
        with self._flushing:
            with self._lock:
                batch = sorted(self._pending.items())
            if batch:
                self.store.put_all(self.region, self.snapshot_id, [(i, d, h) for i, (d, h) in batch])
            with self._lock:
                for index, held in batch:
                    if self._pending.get(index) is held:
                        del self._pending[index]
                        self._held -= len(held[0])
