"""Two snapshots of one lineage read once: NEW's unchanged blocks served from OLD's (``imagelint diff``).

A diff of ``ebs:snap-OLD ebs:snap-NEW`` reads OLD in full, as an audit does, through
:class:`KeptBlocks`: its :class:`~imagelint.aws.ebs_api.EbsApi` with every block it fetched kept
(bounded in bytes) after OLD's stream is closed. NEW is then read through :class:`ChangedOverBase`:
``ListChangedBlocks`` (OLD → NEW) names the blocks that differ; those are fetched from NEW, every
other block is OLD's (kept, or fetched from OLD when it was not kept), and a block NEW does not
have reads as zeros, as always. NEW's stream and disk target above are unchanged.

Why the disk target sees exactly NEW's bytes: a block ListChangedBlocks does not name holds the same
data in both snapshots (that is the API's contract), and before any block is served the listing is
checked against both snapshots' own ``ListSnapshotBlocks``: NEW's allocated blocks must be OLD's,
minus those the changes remove, plus those they write, and the volumes the same size. Anything else
(the API refuses, e.g. ``UNRELATED_SNAPSHOTS`` for snapshots of different lineages, or
``AccessDenied`` without ``ebs:ListChangedBlocks``; a listing that disagrees) reads NEW in full with
its own API, and the reason is said (stderr and the report). Either way the answers are those of a
full read, as far as the listing can be checked without reading: a block both snapshots have whose
change the listing left out would look the same to this check, and there the guarantee is the API's
documented contract.

:meth:`ChangedOverBase.facts` and :meth:`KeptBlocks.facts` say which blocks were read from which
snapshot and which were reused: the diff report's ``blocks`` of each side.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from imagelint.aws.ebs_api import ApiCounters, BlockMap, EbsApi
from imagelint.aws.errors import AwsError

DEFAULT_KEEP_BYTES = 256 * 1024 * 1024  # blocks kept per snapshot (beyond: fetched again when needed)
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

    def blocks(self) -> BlockMap:
        return self.api.blocks()


class Unusable(Exception):
    """The changed-block listing cannot stand in for NEW's own: read NEW in full (the message says why)."""


@dataclass
class KeptBlocks(_OnApi):
    """A snapshot's blocks: its API, with every block fetched kept (up to ``keep_bytes``; the same
    ``bytes`` the stream's cache holds, not a copy), so that reading one again fetches nothing: OLD's
    for NEW, NEW's own after the stream's cache let them go."""

    api: EbsApi
    keep_bytes: int = DEFAULT_KEEP_BYTES
    fetched: set[int] = field(default_factory=set)
    _kept: dict[int, bytes] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fetch(self, index: int) -> bytes:
        return self.serve(index)[0]

    def serve(self, index: int) -> tuple[bytes, bool]:
        """The block's data, and whether it was kept (False: fetched now)."""
        with self._lock:
            kept = self._kept.get(index)
        if kept is not None:
            return kept, True
        data = self.api.fetch(index)
        with self._lock:
            self.fetched.add(index)
            if (len(self._kept) + 1) * len(data) <= self.keep_bytes:
                self._kept[index] = data
        return data, False

    def indexes(self) -> list[int]:
        """The blocks fetched from this snapshot so far."""
        with self._lock:
            return sorted(self.fetched)

    def facts(self) -> dict[str, object]:
        return block_facts("full", self.indexes())


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
    def over(cls, api: EbsApi, base: KeptBlocks) -> ChangedOverBase:
        """NEW read through OLD, once the changed-block listing agrees with both snapshots' own
        listings; :class:`Unusable` (why) otherwise."""
        try:
            listing = api.changed_since(base.snapshot_id)
        except AwsError as exc:
            raise Unusable(f"ListChangedBlocks refused: {exc}") from None
        new, old = api.blocks(), base.blocks()
        if listing.volume_bytes != new.volume_bytes or old.volume_bytes != new.volume_bytes:
            raise Unusable(
                f"volume sizes differ: {old.volume_bytes} bytes in {base.snapshot_id}, "
                f"{new.volume_bytes} in {api.snapshot_id}, {listing.volume_bytes} in ListChangedBlocks"
            )
        written = {i for i, token in listing.changed.items() if token is not None}
        expected = (set(old.tokens) - set(listing.changed)) | written
        disagree = sorted(expected ^ set(new.tokens))
        if disagree:
            raise Unusable(
                f"ListChangedBlocks disagrees with the snapshots' own block listings at "
                f"{len(disagree)} block(s), first {disagree[0]}"
            )
        return cls(api, base, listing.changed)

    def __post_init__(self) -> None:
        self.own = KeptBlocks(self.api, self.base.keep_bytes)

    def fetch(self, index: int) -> bytes:
        if index in self.changed:
            return self.own.fetch(index)
        data, kept = self.base.serve(index)
        with self._lock:
            (self.reused if kept else self.base_fetched).add(index)
        return data

    def facts(self) -> dict[str, object]:
        with self._lock:
            return block_facts(
                "incremental",
                self.own.indexes(),
                base=self.base.snapshot_id,
                changed=len(self.changed),
                reused=self.reused,
                base_fetched=self.base_fetched,
            )


@dataclass
class FullRead(KeptBlocks):
    """NEW read with its own API alone: OLD was no snapshot, or ``fallback`` says why NEW could not be
    read through ``base_snapshot_id``."""

    fallback: str | None = None
    base_snapshot_id: str | None = None

    def facts(self) -> dict[str, object]:
        return block_facts("full", self.indexes(), base=self.base_snapshot_id, fallback=self.fallback)


@dataclass
class SharedBlocks:
    """What a diff's OLD snapshot leaves for NEW, and how each side was read."""

    sides: dict[str, KeptBlocks | ChangedOverBase] = field(default_factory=dict)

    def reader(self, side: str) -> Callable[[EbsApi], KeptBlocks | ChangedOverBase]:
        """How the snapshot of ``side`` (:data:`OLD` or :data:`NEW`) is read, given its API: OLD with
        its blocks kept; NEW through OLD's blocks, or in full with the reason (no reason when OLD
        was not a snapshot)."""

        def choose(api: EbsApi) -> KeptBlocks | ChangedOverBase:
            base = self.sides.get(OLD)
            source: KeptBlocks | ChangedOverBase
            if side == OLD:
                source = KeptBlocks(api)
            elif not isinstance(base, KeptBlocks):
                source = FullRead(api)
            else:
                try:
                    source = ChangedOverBase.over(api, base)
                except Unusable as exc:
                    source = FullRead(api, fallback=str(exc), base_snapshot_id=base.snapshot_id)
            self.sides[side] = source
            return source

        return choose
