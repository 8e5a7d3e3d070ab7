"""Two snapshots of one lineage read once: NEW's unchanged blocks served from OLD's (``imagelint diff``).

A diff of ``ebs:snap-OLD ebs:snap-NEW`` reads OLD in full, as an audit does, through
:class:`KeptBlocks`: its :class:`~imagelint.aws.ebs_api.EbsApi` with every block it fetched kept
(bounded in bytes) after OLD's stream is closed. NEW is then read through :class:`ChangedOverBase`:
``ListChangedBlocks`` (OLD → NEW) names the blocks that differ; those are fetched from NEW, every
other block is OLD's (kept, or fetched from OLD when it was not kept), and a block NEW does not
have reads as zeros, as always. NEW's stream and disk target above are unchanged.

Why the disk target sees exactly NEW's bytes: a block ListChangedBlocks does not name holds the same
data in both snapshots (that is the API's contract), and before any block is served the listing is
checked against both snapshots' own ``ListSnapshotBlocks`` (OLD's as kept, see below): NEW's
allocated blocks must be OLD's, minus those the changes remove, plus those they write, and the
volumes the same size. Anything else (the API refuses, e.g. ``UNRELATED_SNAPSHOTS`` for snapshots
of different lineages, or ``AccessDenied`` without ``ebs:ListChangedBlocks``; a listing that
disagrees) reads NEW in full with its own API, and the reason is said (stderr and the report).
Either way the answers are those of a full read, as far as the listing can be checked without
reading: a block both snapshots have whose change the listing left out would look the same to this
check, and there the guarantee is the API's documented contract.

Between runs: every block a side's walk needed (OLD's, NEW's changed ones and NEW's unchanged ones,
which are NEW's blocks too) is kept in the on-disk :mod:`imagelint.aws.block_store` under its own
snapshot's name, and read back from there before any ``GetSnapshotBlock``, and so is each
snapshot's listing (its size and allocated blocks: a snapshot never changes). When OLD's audit comes
from the audit cache (:meth:`SharedBlocks.remember`), OLD is not read at all and NEW is still read
through it: ListChangedBlocks is checked against OLD's listing as kept (OLD is listed only when the
store lacks it, or to fetch a block the store lacks), its blocks come from the store, and only those
the store lacks are fetched from OLD. So a pipeline that diffs each release against the last one
fetches only NEW's changed blocks its walk needs, and lists only NEW.

Those are asked for at once: NEW's changed blocks that the walk of OLD read (in this run, or kept in
the store by an earlier one) are fetched in parallel as NEW's stream opens
(:meth:`ChangedOverBase.likely`, at most :data:`LIKELY_MAX`), since the walk of NEW reads the same
metadata (inode tables, directories, the package database); otherwise each would cost a round trip
on the walk's path, one after the other. A hint only: a block the walk then does not read was
fetched for nothing (and is listed as fetched).

:meth:`ChangedOverBase.facts` and :meth:`KeptBlocks.facts` say which blocks were read from which
snapshot, which were reused and which came from the store: the diff report's ``blocks`` of each
side. Every full read of NEW in a diff names its reason (``fallback``), OLD not being a snapshot
included.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import field

from imagelint.aws.block_store import BlockStore, StoredBlocks
from imagelint.aws.call_window import CallWindow
from imagelint.aws.ebs_api import ApiCounters, BlockMap, EbsApi
from imagelint.aws.errors import AwsError
from imagelint.records import dataclass

DEFAULT_KEEP_BYTES = 256 * 1024 * 1024  # blocks kept per snapshot (beyond: fetched again when needed)
LIKELY_MAX = 32  # NEW's changed blocks fetched ahead because OLD's walk read them (16 MiB)
OLD, NEW = "old", "new"


def block_facts(
    mode: str,
    fetched: Iterable[int],
    *,
    base: str | None = None,
    fallback: str | None = None,
    changed: int | None = None,
    reused: Iterable[int] = (),
    base_fetched: Iterable[int] = (),
    stored: Iterable[int] = (),
) -> dict[str, object]:
    """The diff report's ``blocks`` of a snapshot side (``imagelint schema diff`` describes them)."""
    return {
        "mode": mode,
        "base_snapshot_id": base,
        "fallback": fallback,
        "changed_blocks": changed,
        "fetched": sorted(fetched),
        "reused": sorted(reused),
        "base_fetched": sorted(base_fetched),
        "stored": sorted(stored),
    }


class _OnApi:
    """A block source over one snapshot's API: its id, counters and listing are the API's."""

    api: EbsApi

    @property
    def snapshot_id(self) -> str:
        return self.api.snapshot_id

    @property
    def counters(self) -> ApiCounters:
        return self.api.counters

    @property
    def window(self) -> CallWindow:
        return self.api.window

    def blocks(self) -> BlockMap:
        return self.api.blocks()


class Unusable(Exception):
    """The changed-block listing cannot stand in for NEW's own: read NEW in full (the message says why)."""


@dataclass
class KeptBlocks(_OnApi):
    """A snapshot's blocks: its API, with every block fetched kept (up to ``keep_bytes``; the same
    ``bytes`` the stream's cache holds, not a copy), so that reading one again fetches nothing: OLD's
    for NEW, NEW's own after the stream's cache let them go. With ``stored`` (the snapshot's blocks
    in the on-disk :class:`~imagelint.aws.block_store.BlockStore`), a block kept by an earlier run
    is read from there, and every block fetched or :meth:`keep`-t is written there (held, and
    written together when the read is over: :meth:`flush`)."""

    api: EbsApi
    keep_bytes: int = DEFAULT_KEEP_BYTES
    stored: StoredBlocks | None = None
    fetched: set[int] = field(default_factory=set)
    from_store: set[int] = field(default_factory=set)
    _kept: dict[int, bytes] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fetch(self, index: int) -> bytes:
        return self.serve(index)[0]

    def serve(self, index: int) -> tuple[bytes, bool]:
        """The block's data, and whether it was kept, here or on disk (False: fetched now)."""
        with self._lock:
            kept = self._kept.get(index)
        if kept is not None:
            return kept, True
        data = None if self.stored is None else self.stored.get(index)
        if data is not None:
            with self._lock:
                self.from_store.add(index)
            self._remember(index, data)
            return data, True
        data = self.api.fetch(index)
        with self._lock:
            self.fetched.add(index)
        self.keep(index, data)
        return data, False

    def keep(self, index: int, data: bytes) -> None:
        """Keep a block of this snapshot got elsewhere (NEW's unchanged block, read from OLD's)."""
        self._remember(index, data)
        if self.stored is not None:
            self.stored.put(index, data)

    def _remember(self, index: int, data: bytes) -> None:
        with self._lock:
            if index not in self._kept and (len(self._kept) + 1) * len(data) <= self.keep_bytes:
                self._kept[index] = data

    def allocated(self) -> tuple[int, frozenset[int]]:
        """The snapshot's volume size and allocated blocks: its listing in hand, else the one kept in
        the store (a snapshot never changes), else listed now."""
        listing = self.api.listed()
        if listing is None and self.stored is not None:
            kept = self.stored.listing()
            if kept is not None:
                return kept
        listing = listing or self.api.blocks()
        return listing.volume_bytes, frozenset(listing.tokens)

    def flush(self) -> None:
        """Write the blocks held for the on-disk store (:meth:`StoredBlocks.flush`), and the listing
        if this run listed the snapshot: the read is over."""
        if self.stored is not None:
            self.stored.flush()
            listing = self.api.listed()
            if listing is not None:
                self.stored.keep_listing(listing.volume_bytes, listing.tokens)

    def walked(self, indexes: Iterable[int], limit: int) -> list[int]:
        """The first ``limit`` of ``indexes`` a walk of this snapshot read: in this run (fetched,
        kept) or in an earlier one (kept in the store; a hint, the entry is not read)."""
        with self._lock:
            seen = self.fetched | self.from_store | set(self._kept)
        found: list[int] = []
        for index in indexes:
            if len(found) >= limit:
                break
            if index in seen or (self.stored is not None and self.stored.has(index)):
                found.append(index)
        return found

    def indexes(self) -> list[int]:
        """The blocks fetched from this snapshot so far."""
        with self._lock:
            return sorted(self.fetched)

    def stored_indexes(self) -> list[int]:
        """The blocks read from the on-disk store so far."""
        with self._lock:
            return sorted(self.from_store)

    def facts(self) -> dict[str, object]:
        return block_facts("full", self.indexes(), stored=self.stored_indexes())


@dataclass
class ChangedOverBase(_OnApi):
    """NEW's blocks: those ListChangedBlocks names from NEW's API, the others from OLD's."""

    api: EbsApi
    base: KeptBlocks
    changed: dict[int, str | None]
    own: KeptBlocks = field(init=False)  # NEW's changed blocks, kept: read again, never fetched again
    reused: set[int] = field(default_factory=set)
    base_fetched: set[int] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def over(cls, api: EbsApi, base: KeptBlocks, stored: StoredBlocks | None = None) -> ChangedOverBase:
        """NEW read through OLD, once the changed-block listing agrees with both snapshots' own
        listings; :class:`Unusable` (why) otherwise."""
        try:
            listing = api.changed_since(base.snapshot_id)
        except AwsError as exc:
            raise Unusable(f"ListChangedBlocks refused: {exc}") from None
        new, (old_bytes, old_blocks) = api.blocks(), base.allocated()
        if listing.volume_bytes != new.volume_bytes or old_bytes != new.volume_bytes:
            raise Unusable(
                f"volume sizes differ: {old_bytes} bytes in {base.snapshot_id}, "
                f"{new.volume_bytes} in {api.snapshot_id}, {listing.volume_bytes} in ListChangedBlocks"
            )
        written = {i for i, token in listing.changed.items() if token is not None}
        expected = (old_blocks - set(listing.changed)) | written
        disagree = sorted(expected ^ set(new.tokens))
        if disagree:
            raise Unusable(
                f"ListChangedBlocks disagrees with the snapshots' own block listings at "
                f"{len(disagree)} block(s), first {disagree[0]}"
            )
        return cls(api, base, listing.changed, stored=stored)

    stored: StoredBlocks | None = None  # NEW's own blocks on disk: its changed and its unchanged ones

    def __post_init__(self) -> None:
        self.own = KeptBlocks(self.api, self.base.keep_bytes, self.stored)

    def fetch(self, index: int) -> bytes:
        if index in self.changed:
            return self.own.fetch(index)
        data, kept = self.base.serve(index)
        with self._lock:
            (self.reused if kept else self.base_fetched).add(index)
        if self.stored is not None:  # NEW's block too: tomorrow's OLD (OLD's data, a second name)
            self.stored.put(index, data, None if self.base.stored is None else self.base.stored.digest(index))
        return data

    def likely(self) -> list[int]:
        """NEW's changed blocks the walk of OLD read (at most :data:`LIKELY_MAX`, lowest first): the
        walk of NEW reads the same metadata, so these are worth fetching at once, in parallel, rather
        than one at a time as the walk comes to them (a hint: a block it does not read is fetched
        for nothing, and counted as fetched)."""
        written = sorted(i for i, token in self.changed.items() if token is not None)
        return self.base.walked(written, LIKELY_MAX)

    def flush(self) -> None:
        """Write the blocks held for the on-disk store, NEW's and those fetched from OLD."""
        self.own.flush()
        self.base.flush()

    def facts(self) -> dict[str, object]:
        with self._lock:
            stored = set(self.own.stored_indexes()) | (self.reused & set(self.base.stored_indexes()))
            return block_facts(
                "incremental",
                self.own.indexes(),
                base=self.base.snapshot_id,
                changed=len(self.changed),
                reused=self.reused,
                base_fetched=self.base_fetched,
                stored=stored,
            )


@dataclass
class FullRead(KeptBlocks):
    """NEW read with its own API alone: OLD was no snapshot, or ``fallback`` says why NEW could not be
    read through ``base_snapshot_id``."""

    fallback: str | None = None
    base_snapshot_id: str | None = None

    def facts(self) -> dict[str, object]:
        return block_facts(
            "full",
            self.indexes(),
            base=self.base_snapshot_id,
            fallback=self.fallback,
            stored=self.stored_indexes(),
        )


@dataclass
class SharedBlocks:
    """What a diff's OLD snapshot leaves for NEW, and how each side was read. ``store``: the blocks
    kept on disk between runs (None: off); ``cached``: a side whose audit came from the audit cache
    (not read in this run), as (region, snapshot id), so that NEW is still read through it."""

    sides: dict[str, KeptBlocks | ChangedOverBase] = field(default_factory=dict)
    cached: dict[str, tuple[str, str]] = field(default_factory=dict)
    store: BlockStore | None = field(default_factory=BlockStore)

    def remember(self, side: str, region: str, snapshot_id: str) -> None:
        """``side``'s audit came from the audit cache: its snapshot is not read in this run."""
        self.cached[side] = (region, snapshot_id)

    def _stored(self, region: str, snapshot_id: str) -> StoredBlocks | None:
        return None if self.store is None else StoredBlocks(self.store, region, snapshot_id)

    def _base(self, api: EbsApi, region: str) -> KeptBlocks | str:
        """OLD's blocks for NEW (read in this run, or its audit cached: then its API and stored
        blocks), or why there are none."""
        base = self.sides.get(OLD)
        if isinstance(base, KeptBlocks):
            return base
        if OLD not in self.cached:
            return "OLD is not an EBS snapshot: there are no blocks to read NEW through"
        old_region, old_id = self.cached[OLD]
        if old_region != region:
            return (
                f"OLD {old_id} is in {old_region}, NEW in {region}: ListChangedBlocks compares "
                "snapshots of one region"
            )
        return KeptBlocks(EbsApi(api.client, old_id, window=api.window), stored=self._stored(region, old_id))

    def reader(self, side: str, region: str) -> Callable[[EbsApi], KeptBlocks | ChangedOverBase]:
        """How the snapshot of ``side`` (:data:`OLD` or :data:`NEW`) in ``region`` is read, given its
        API: OLD with its blocks kept; NEW through OLD's blocks, or in full with the reason."""

        def choose(api: EbsApi) -> KeptBlocks | ChangedOverBase:
            stored = self._stored(region, api.snapshot_id)
            source: KeptBlocks | ChangedOverBase
            if side == OLD:
                source = KeptBlocks(api, stored=stored)
            else:
                base = self._base(api, region)
                if isinstance(base, str):
                    source = FullRead(api, stored=stored, fallback=base)
                else:
                    try:
                        source = ChangedOverBase.over(api, base, stored)
                    except Unusable as exc:
                        source = FullRead(
                            api, stored=stored, fallback=str(exc), base_snapshot_id=base.snapshot_id
                        )
            self.sides[side] = source
            return source

        return choose

    def done(self) -> None:
        """A snapshot's read is over: the store back within its bound."""
        if self.store is not None:
            self.store.prune()
