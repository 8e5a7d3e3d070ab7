"""EBS snapshot blocks kept on disk between runs, so a release gate reads the last release's blocks once.

A snapshot never changes, so one of its 512 KiB blocks is named for good by the region, the snapshot
id and the block index. ``imagelint diff`` keeps here every block a snapshot's walk needed (OLD's and
NEW's: today's NEW is tomorrow's OLD) and serves them back instead of calling ``GetSnapshotBlock``
(:class:`imagelint.aws.ebs_reuse.KeptBlocks`).

- Where: ``$XDG_CACHE_HOME/imagelint/blocks`` (``~/.cache/imagelint/blocks``);
  ``IMAGELINT_NO_CACHE`` turns it off with the other caches. Trusted only when ours
  (:mod:`imagelint.cachefiles`: a directory only this user may write, entries opened without
  following links or blocking, regular, owned and singly linked).
- Content-addressed: a block's data is one ``.blk`` file named by the data's SHA-256 (the checksum
  ``GetSnapshotBlock`` gave and :func:`imagelint.aws.ebs_api.verified` checked), and each name
  (region, snapshot, index) is a small ``.ref`` entry, named by the SHA-256 of the name, holding
  the data's SHA-256 and authenticated with this user's key over the name. A block NEW has
  unchanged from OLD is OLD's data under a second name: keeping it writes a reference, not another
  512 KiB. A data file needs no key: it is served only when its bytes hash to the digest an
  authenticated reference names. Files are written atomically (temporary file, rename) under the
  directory's lock; not flushed to disk block by block: a file a crash left short or torn fails its
  checksum.
- A snapshot's listing (its volume size and allocated blocks, without the tokens, which expire) is
  kept too, as an authenticated ``.lst`` entry named by the SHA-256 of the snapshot's name: a diff
  whose OLD comes from the caches checks ListChangedBlocks against it instead of listing OLD again.
- Written behind (:class:`StoredBlocks`): a snapshot's blocks are held (at most
  :data:`PENDING_BYTES`) and written together under one taking of the lock when the read is over
  (:meth:`StoredBlocks.flush`), not one by one from the threads that fetch them, which would hold
  up the reader behind the lock and the disk; past the bound the thread that puts writes them all.
- A cache is never a reason to fail or to change an answer: a reference that is not authenticated
  for its name, or whose data file is missing, is not one block long or does not match the
  checksum, is a miss (and the bad file removed); a block of another snapshot is never served under
  this one's name, only data whose checksum this snapshot's own block had. A directory that cannot
  be written turns the store off for the run, with one warning line.
- Bounded: :data:`MAX_BYTES` of data in all, :data:`MAX_REFS` references and :data:`MAX_LISTINGS`
  listings (least recently used out; a hit touches its files), pruned every :data:`PRUNE_EVERY`
  bytes written and when a read is done (:meth:`BlockStore.prune`).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable
from pathlib import Path

from imagelint import stderr
from imagelint.aws.ebs_api import BLOCK_SIZE
from imagelint.cachefiles import CacheDir

NAME = "blocks"
MAGIC = b"imagelint-ebs-block 2\n"  # a data file: this, then the block
MAX_BYTES = 2 * 1024**3
MAX_FILES = MAX_BYTES // BLOCK_SIZE + 16
MAX_REFS = 8 * MAX_FILES  # a block shared by several snapshots has a reference for each
PRUNE_EVERY = 64 * 1024 * 1024
PENDING_BYTES = 64 * 1024 * 1024  # blocks put and not written yet, per snapshot
SUFFIX = ".blk"
REF_SUFFIX = ".ref"
REF_MAX = 256  # an authenticated reference entry is far shorter: anything longer is not one
LIST_SUFFIX = ".lst"
MAX_LISTINGS = 1024
MAX_LISTING_BYTES = 2 * 1024 * 1024  # a 64 TiB volume's 131072 blocks take about 1 MiB


def _hex_digest(raw: bytes) -> str | None:
    digest = raw.decode("ascii", "replace")
    return digest if len(digest) == 64 and all(c in "0123456789abcdef" for c in digest) else None


class BlockStore:
    """Blocks by (region, snapshot id, index), in the ``blocks`` cache (or ``directory``); thread-safe."""

    def __init__(self, directory: Path | None = None, *, max_bytes: int | None = None) -> None:
        self._store = CacheDir.open(NAME) if directory is None else CacheDir.at(NAME, directory)
        self.directory = None if self._store is None else self._store.path
        self.max_bytes = MAX_BYTES if max_bytes is None else max_bytes
        self._lock = threading.Lock()
        self._written = 0

    @staticmethod
    def key(region: str, snapshot_id: str, index: int) -> str:
        return f"{region}:{snapshot_id}:{index}"

    @staticmethod
    def ref_entry(key: str) -> str:
        """The file name of the reference kept for the block named ``key``."""
        return hashlib.sha256(key.encode()).hexdigest() + REF_SUFFIX

    @staticmethod
    def data_entry(digest: str) -> str:
        """The file name of the data whose SHA-256 is ``digest``."""
        return digest + SUFFIX

    @staticmethod
    def listing_entry(name: str) -> str:
        """The file name of the listing of the snapshot ``region:snapshot``."""
        return hashlib.sha256(name.encode()).hexdigest() + LIST_SUFFIX

    def get(self, region: str, snapshot_id: str, index: int) -> bytes | None:
        """The block kept under that name, its checksum verified; None (a miss) otherwise."""
        found = self.get_verified(region, snapshot_id, index)
        return None if found is None else found[0]

    def get_verified(self, region: str, snapshot_id: str, index: int) -> tuple[bytes, str] | None:
        """The block kept under that name and its SHA-256 (hex), verified; None (a miss) otherwise."""
        store = self._store
        if store is None:
            return None
        key = self.key(region, snapshot_id, index)
        ref = self.ref_entry(key)
        raw = store.read(ref, key.encode(), limit=REF_MAX)
        digest = None if raw is None else _hex_digest(raw)
        if digest is None:
            if raw is not None:
                store.remove(ref)
            return None
        kept = store.read(self.data_entry(digest), limit=len(MAGIC) + BLOCK_SIZE, authenticated=False)
        data = b"" if kept is None else kept[len(MAGIC) :]
        if (
            kept is None
            or not kept.startswith(MAGIC)
            or len(data) != BLOCK_SIZE
            or hashlib.sha256(data).hexdigest() != digest
        ):
            store.remove(ref)  # the next read of this name is a plain miss
            if kept is not None:
                store.remove(self.data_entry(digest))
            return None
        return data, digest

    def get_listing(self, region: str, snapshot_id: str) -> tuple[int, frozenset[int]] | None:
        """The snapshot's volume size and allocated blocks, as kept and authenticated; None (a miss)."""
        store = self._store
        if store is None:
            return None
        name = f"{region}:{snapshot_id}"
        payload = store.read(self.listing_entry(name), name.encode(), limit=MAX_LISTING_BYTES)
        if payload is None:
            return None
        try:
            size, _, indexes = payload.decode("ascii").partition("\n")
            return int(size), frozenset(int(i) for i in indexes.split(",") if i)
        except ValueError:
            store.remove(self.listing_entry(name))
            return None

    def put_listing(self, region: str, snapshot_id: str, volume_bytes: int, indexes: Iterable[int]) -> None:
        """Keep a snapshot's listing (atomically; turned off like :meth:`put_all` if it cannot be)."""
        store = self._store
        payload = f"{volume_bytes}\n{','.join(str(i) for i in sorted(indexes))}".encode()
        if store is None or len(payload) > MAX_LISTING_BYTES:
            return
        name = f"{region}:{snapshot_id}"
        try:
            with store.locked():
                store.write(self.listing_entry(name), payload, name.encode())
        except OSError as exc:
            self._off(exc)

    def has(self, region: str, snapshot_id: str, index: int) -> bool:
        """Whether a reference is kept under that name (not read, not verified: a hint, never data)."""
        store = self._store
        return store is not None and store.exists(self.ref_entry(self.key(region, snapshot_id, index)))

    def put(self, region: str, snapshot_id: str, index: int, data: bytes, digest: str | None = None) -> None:
        """Keep a verified block (atomically); the store is turned off for the run if it cannot be
        written, with one warning. ``digest``: its SHA-256 (hex), when the caller knows it."""
        self.put_all(region, snapshot_id, [(index, data, digest)])

    def put_all(self, region: str, snapshot_id: str, blocks: Iterable[tuple[int, bytes, str | None]]) -> None:
        """Keep verified blocks of one snapshot under one taking of the lock: a reference each, and
        the data of those whose content is not kept already (under any name)."""
        store = self._store
        if store is None:
            return
        entries = [
            (self.key(region, snapshot_id, index), known or hashlib.sha256(data).hexdigest(), data)
            for index, data, known in blocks
            if len(data) == BLOCK_SIZE
        ]
        if not entries:
            return
        written = 0
        try:
            with store.locked():
                for key, digest, data in entries:
                    if not store.touch(
                        self.data_entry(digest)
                    ):  # the same content is kept: only the name is new
                        store.write(self.data_entry(digest), MAGIC + data, authenticated=False)
                        written += len(MAGIC) + len(data)
                    store.write(self.ref_entry(key), digest.encode(), key.encode())
                    written += REF_MAX
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
        store = self._store
        if store is None:
            return
        try:
            with store.locked():
                store.prune(SUFFIX, max_files=MAX_FILES, max_bytes=self.max_bytes)
                store.prune(REF_SUFFIX, max_files=MAX_REFS, max_bytes=MAX_REFS * REF_MAX)
                store.prune(
                    LIST_SUFFIX, max_files=MAX_LISTINGS, max_bytes=MAX_LISTINGS * MAX_LISTING_BYTES // 8
                )
        except OSError as exc:
            self._off(exc)

    def _off(self, exc: OSError) -> None:
        with self._lock:
            store, self._store = self._store, None
        if store is not None:
            stderr.warning(
                f"block store {store.path}: not written ({exc.strerror or exc}); going on without it"
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
