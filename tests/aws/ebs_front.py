"""Fault injection for the EBS direct APIs on the moto front (:mod:`tests.aws.moto_env`).

moto 5.2 implements StartSnapshot, PutSnapshotBlock, CompleteSnapshot, ListSnapshotBlocks and
GetSnapshotBlock, stores the blocks and echoes the checksum given at upload (it validates nothing,
ignores BlockToken, MaxResults and NextToken, and gives UUIDs as tokens). It differs from AWS in one
thing a reader depends on: it reports ``BlockSize`` 512, where AWS reports 524288 (the documented
block and index unit). The front corrects that field and otherwise forwards the replies untouched.

What moto cannot do, the front does on request (``env.ebs``, reset per test): added latency per
``GetSnapshotBlock``, holding its replies until the test lets them go, throttling, 503s, access
denied, snapshot not found, corrupted block data, and expired block tokens. Errors have AWS's
rest-json shape (``x-amzn-ErrorType`` header, a body with ``Message`` and ``Reason``), so botocore
parses them as it parses AWS's. The front also records the block indexes requested, the server-side
count of ``GetSnapshotBlock`` calls.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

BLOCK_SIZE = 524288
_BLOCK = re.compile(r"^/snapshots/(snap-[0-9a-f]+)/blocks/(\d+)")
_LIST = re.compile(r"^/snapshots/(snap-[0-9a-f]+)/blocks(\?|$)")


@dataclass
class EbsFaults:
    latency: float = 0.0  # seconds added to every GetSnapshotBlock
    throttle: int = 0  # the next N GetSnapshotBlock calls: RequestThrottledException
    unavailable: int = 0  # the next N GetSnapshotBlock calls: 503
    corrupt: int = 0  # the next N GetSnapshotBlock replies: one data byte flipped
    expire: int = 0  # the next N GetSnapshotBlock calls: ValidationException INVALID_BLOCK_TOKEN
    deny: str | None = None  # "list" | "get": AccessDeniedException on that call
    not_found: bool = False  # ListSnapshotBlocks: ResourceNotFoundException
    hold: threading.Event | None = None  # GetSnapshotBlock answers only once this is set
    gets: list[int] = field(default_factory=list)  # block indexes GetSnapshotBlock was asked for
    lists: int = 0
    in_flight: int = 0
    max_in_flight: int = 0  # the most GetSnapshotBlock calls served at once
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]

    def _take(self, name: str) -> bool:
        with self.lock:
            left = int(getattr(self, name))
            if left > 0:
                setattr(self, name, left - 1)
            return left > 0

    def handle(self, front: Any, body: bytes) -> bool:
        """Answer or alter an EBS request; False: not an EBS read, forward it as it is."""
        path = front.path
        if front.command != "GET":
            return False
        block = _BLOCK.match(path)
        if block:
            return self._get(front, body, int(block.group(2)))
        if _LIST.match(path):
            return self._list(front, body)
        return False

    def _list(self, front: Any, body: bytes) -> bool:
        with self.lock:
            self.lists += 1
        if self.deny == "list":
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

    def _get(self, front: Any, body: bytes, index: int) -> bool:
        with self.lock:
            self.gets.append(index)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return self._answer_get(front, body)
        finally:
            with self.lock:
                self.in_flight -= 1

    def _answer_get(self, front: Any, body: bytes) -> bool:
        hold = self.hold
        if hold is not None:
            hold.wait(timeout=60)
        if self.latency:
            time.sleep(self.latency)
        if self.deny == "get":
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
