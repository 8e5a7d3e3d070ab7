"""Fault injection for the EBS direct APIs on the moto front (:mod:`tests.aws.moto_env`).

moto 5.2 implements StartSnapshot, PutSnapshotBlock, CompleteSnapshot, ListSnapshotBlocks and
GetSnapshotBlock, stores the blocks and echoes the checksum given at upload (it validates nothing,
ignores BlockToken, MaxResults and NextToken, and gives UUIDs as tokens). It differs from AWS in one
thing a reader depends on: it reports ``BlockSize`` 512, where AWS reports 524288 (the documented
block and index unit). The front corrects that field and otherwise forwards the replies untouched.

What moto cannot do, the front does on request (``env.ebs``, reset per test): added latency per
``GetSnapshotBlock``, holding its replies until the test lets them go, throttling, 503s, access
denied (every call, or every read of the snapshots in ``denied``), snapshot not found, corrupted block
data, and expired block tokens. Errors have AWS's
rest-json shape (``x-amzn-ErrorType`` header, a body with ``Message`` and ``Reason``), so botocore
parses them as it parses AWS's. The front also records the block indexes requested, the server-side
count of ``GetSnapshotBlock`` calls (``gets``; ``snapshot_gets`` with the snapshot of each), and the
most snapshots read at once (``max_snapshots_in_flight``); with ``meet = N`` every ``GetSnapshotBlock``
waits until N snapshots are being read at once (``met`` is set then; 30 s at most), so a test proves
that reads of several snapshots overlap rather than hoping they do.

moto ignores ``StartSnapshot``'s ``ParentSnapshotId``, and its ``ListChangedBlocks`` leaves out the
blocks only the second snapshot has and neither paginates nor knows lineages. The front records each
snapshot's parent from ``StartSnapshot`` and answers ``ListChangedBlocks`` itself from moto's stored
blocks of both snapshots (a block changed if one of them has it and the other does not, or the data
differs), in AWS's documented shape: ``ChangedBlocks`` (``BlockIndex``, ``FirstBlockToken`` absent
when the first snapshot lacks the block, ``SecondBlockToken`` absent when the second one does),
``BlockSize`` 524288, ``VolumeSize``, ``ExpiryTime`` and ``NextToken`` pages of at most
``MaxResults`` (100..10000, or ``changed_page`` when set: AWS may return fewer). Snapshots whose
lineages (parent chains) do not meet get ``ValidationException`` with reason ``UNRELATED_SNAPSHOTS``.
``deny = "changed"`` refuses it (AccessDenied); ``changed_lie`` names those blocks as absent from the
second snapshot although it has them (a listing that lies, for the reader's cross-check).
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

BLOCK_SIZE = 524288
_BLOCK = re.compile(r"^/snapshots/(snap-[0-9a-f]+)/blocks/(\d+)")
_LIST = re.compile(r"^/snapshots/(snap-[0-9a-f]+)/blocks(\?|$)")
_CHANGED = re.compile(r"^/snapshots/(snap-[0-9a-f]+)/changedblocks(\?|$)")
_REGION = re.compile(r"Credential=[^/]+/\d+/([a-z0-9-]+)/ebs/")


@dataclass
class EbsFaults:
    latency: float = 0.0  # seconds added to every GetSnapshotBlock
    throttle: int = 0  # the next N GetSnapshotBlock calls: RequestThrottledException
    # the account's quota, as calls in flight: a GetSnapshotBlock arriving while this many are
    # being served is throttled at once (0: no quota)
    quota: int = 0
    over_quota: int = 0  # GetSnapshotBlock calls throttled by the quota
    unavailable: int = 0  # the next N GetSnapshotBlock calls: 503
    corrupt: int = 0  # the next N GetSnapshotBlock replies: one data byte flipped
    expire: int = 0  # the next N GetSnapshotBlock calls: ValidationException INVALID_BLOCK_TOKEN
    deny: str | None = None  # "list" | "get" | "changed": AccessDeniedException on that call
    not_found: bool = False  # ListSnapshotBlocks: ResourceNotFoundException
    denied: set[str] = field(default_factory=set)  # these snapshots: AccessDeniedException on every read
    hold: threading.Event | None = None  # GetSnapshotBlock answers only once this is set
    gets: list[int] = field(default_factory=list)  # block indexes GetSnapshotBlock was asked for
    snapshot_gets: list[tuple[str, int]] = field(default_factory=list)  # the same, with the snapshot
    lists: int = 0
    changed_lists: int = 0  # ListChangedBlocks pages served
    changed_page: int | None = None  # ListChangedBlocks: at most this many blocks a page
    changed_lie: set[int] = field(default_factory=set)  # ListChangedBlocks: "not in the second one"
    parents: dict[str, str | None] = field(default_factory=dict)  # lineage, from StartSnapshot
    in_flight: int = 0
    max_in_flight: int = 0  # the most GetSnapshotBlock calls served at once
    snapshots_in_flight: dict[str, int] = field(default_factory=dict)  # calls in flight, by snapshot
    max_snapshots_in_flight: int = 0  # the most snapshots read at once (several AMIs checked together)
    meet: int = 0  # GetSnapshotBlock waits (30 s at most) until this many snapshots are read at once
    met: threading.Event = field(default_factory=threading.Event)
    generation: int = 0  # bumped by reset: a call still in flight from before it is not counted after it
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        parents = self.parents  # the snapshots stay: so does their lineage
        generation = self.generation + 1
        self.__init__()  # type: ignore[misc]
        self.parents, self.generation = parents, generation

    def _take(self, name: str) -> bool:
        with self.lock:
            left = int(getattr(self, name))
            if left > 0:
                setattr(self, name, left - 1)
            return left > 0

    def handle(self, front: Any, body: bytes) -> bool:
        """Answer or alter an EBS request; False: not an EBS read, forward it as it is."""
        path = front.path
        if front.command == "POST" and path == "/snapshots":
            return self._start(front, body)
        if front.command != "GET":
            return False
        block = _BLOCK.match(path)
        if block:
            return self._get(front, body, block.group(1), int(block.group(2)))
        listing = _LIST.match(path)
        if listing:
            return self._list(front, body, listing.group(1))
        changed = _CHANGED.match(path)
        if changed:
            return self._changed(front, changed.group(1))
        return False

    def _start(self, front: Any, body: bytes) -> bool:
        status, headers, data = front._forward("POST", body)
        if status < 300:
            parent = json.loads(body or b"{}").get("ParentSnapshotId")
            with self.lock:
                self.parents[json.loads(data)["SnapshotId"]] = parent
        front._send(status, headers, data)
        return True

    def _root(self, snapshot_id: str) -> str:
        while self.parents.get(snapshot_id):
            snapshot_id = str(self.parents[snapshot_id])
        return snapshot_id

    def _changed(self, front: Any, second_id: str) -> bool:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.ebs.models import ebs_backends

        query = {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(front.path).query).items()}
        with self.lock:
            self.changed_lists += 1
        if self.deny == "changed":
            return _error(front, 403, "AccessDeniedException", "not authorized", "UNAUTHORIZED_ACCOUNT")
        region = _REGION.search(front.headers.get("Authorization", ""))
        snapshots = ebs_backends[DEFAULT_ACCOUNT_ID][region.group(1) if region else "us-east-1"].snapshots
        first_id = query.get("firstSnapshotId")
        if first_id is None:
            message = "FirstSnapshotId must be specified with SecondSnapshotId"
            return _error(front, 400, "ValidationException", message, "INVALID_PARAMETER_VALUE")
        if first_id not in snapshots or second_id not in snapshots:
            return _error(front, 404, "ResourceNotFoundException", "snapshot not found", "SNAPSHOT_NOT_FOUND")
        if self._root(first_id) != self._root(second_id):
            message = f"The snapshots {first_id} and {second_id} are not of the same lineage"
            return _error(front, 400, "ValidationException", message, "UNRELATED_SNAPSHOTS")
        limit = int(query.get("maxResults", 10000))
        if not 100 <= limit <= 10000:
            return _error(
                front, 400, "ValidationException", "maxResults: 100..10000", "INVALID_PARAMETER_VALUE"
            )
        first, second = snapshots[first_id].blocks, snapshots[second_id].blocks
        token = query.get("pageToken")  # it wins over startingBlockIndex, as documented
        start = int(base64.b64decode(token)) if token else int(query.get("startingBlockIndex", 0))
        indexes = [
            i
            for i in sorted(set(first) | set(second))
            if i >= start
            and (i not in first or i not in second or first[i].block_data != second[i].block_data)
        ]
        page = indexes[: min(limit, self.changed_page or limit)]
        reply: dict[str, Any] = {
            "ChangedBlocks": [
                _changed_block(
                    i,
                    first_id if i in first else None,
                    second_id if i in second and i not in self.changed_lie else None,
                )
                for i in page
            ],
            "ExpiryTime": (datetime.now(UTC) + timedelta(days=7)).timestamp(),
            "VolumeSize": snapshots[second_id].volume_size,
            "BlockSize": BLOCK_SIZE,
        }
        if len(indexes) > len(page):
            reply["NextToken"] = base64.b64encode(str(indexes[len(page)]).encode()).decode()
        front._send(200, {"Content-Type": "application/json"}, json.dumps(reply).encode())
        return True

    def _list(self, front: Any, body: bytes, snapshot_id: str) -> bool:
        with self.lock:
            self.lists += 1
        if self.deny == "list" or snapshot_id in self.denied:
            return _error(front, 403, "AccessDeniedException", "not authorized", "UNAUTHORIZED_ACCOUNT")
        if self.not_found:
            return _error(front, 404, "ResourceNotFoundException", "snapshot not found", "SNAPSHOT_NOT_FOUND")
        status, headers, data = front._forward("GET", body)
        if status == 200:
            reply = json.loads(data)
            reply["BlockSize"] = BLOCK_SIZE  # moto says 512
            data = json.dumps(reply).encode()
        front._send(status, headers, data)
        return True

    def _get(self, front: Any, body: bytes, snapshot_id: str, index: int) -> bool:
        with self.lock:
            self.gets.append(index)
            self.snapshot_gets.append((snapshot_id, index))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.snapshots_in_flight[snapshot_id] = self.snapshots_in_flight.get(snapshot_id, 0) + 1
            reading = sum(1 for n in self.snapshots_in_flight.values() if n > 0)
            self.max_snapshots_in_flight = max(self.max_snapshots_in_flight, reading)
            if self.meet and reading >= self.meet:
                self.met.set()
            generation = self.generation
            over = bool(self.quota) and self.in_flight > self.quota
            self.over_quota += over
        released = False

        def release() -> None:
            nonlocal released
            with self.lock:
                if not released and self.generation == generation:
                    self.in_flight -= 1
                    self.snapshots_in_flight[snapshot_id] -= 1
                released = True

        replying = _Replying(front, release)
        try:
            if over:
                return _error(replying, 400, "RequestThrottledException", "over quota", "ACCOUNT_THROTTLED")
            if self.meet:
                self.met.wait(timeout=30)
            return self._answer_get(replying, body, snapshot_id)
        finally:
            release()

    def _answer_get(self, front: Any, body: bytes, snapshot_id: str) -> bool:
        hold = self.hold
        if hold is not None:
            hold.wait(timeout=60)
        if self.latency:
            time.sleep(self.latency)
        if self.deny == "get" or snapshot_id in self.denied:
            return _error(front, 403, "AccessDeniedException", "not authorized", "DEPENDENCY_ACCESS_DENIED")
        if self._take("throttle"):
            return _error(front, 400, "RequestThrottledException", "slow down", "ACCOUNT_THROTTLED")
        if self._take("unavailable"):
            return _error(front, 503, "InternalServerException", "try again", None)
        if self._take("expire"):
            message = "The block token has expired."
            return _error(front, 400, "ValidationException", message, "INVALID_BLOCK_TOKEN")
        status, headers, data = front._forward("GET", body)
        if status == 200 and data and self._take("corrupt"):
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        front._send(status, headers, data)
        return True


def _token(snapshot_id: str, index: int) -> str:
    return base64.b64encode(f"{snapshot_id}/{index}".encode()).decode()


def _changed_block(index: int, first_id: str | None, second_id: str | None) -> dict[str, Any]:
    block: dict[str, Any] = {"BlockIndex": index}
    if first_id is not None:
        block["FirstBlockToken"] = _token(first_id, index)
    if second_id is not None:
        block["SecondBlockToken"] = _token(second_id, index)
    return block


class _Replying:
    """The front, with a call's in-flight count ended just before its reply goes out: once the client
    has the reply it may send its next call, and a count still held then saw two calls at once where
    the client made one after the other (a flake of the serial test on a loaded runner)."""

    def __init__(self, front: Any, release: Callable[[], None]) -> None:
        self._front, self._release = front, release

    def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self._release()
        self._front._send(status, headers, body)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._front, name)


def _error(front: Any, status: int, code: str, message: str, reason: str | None) -> bool:
    body: dict[str, Any] = {"Message": message}
    if reason:
        body["Reason"] = reason
    front._send(
        status,
        {"Content-Type": "application/json", "x-amzn-ErrorType": code},
        json.dumps(body).encode(),
    )
    return True
