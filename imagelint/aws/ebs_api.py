"""The EBS direct API calls a snapshot reader needs, with retries, checksums and honest errors.

- ``ListSnapshotBlocks`` (paginated, ``MaxResults`` 100..10000) gives the allocated blocks: their
  index (in units of 512 KiB, whatever else the reply says) and a block token. Blocks never written
  are not listed and read as zeros. Tokens are temporary: AWS documents seven days (``ExpiryTime`` in
  the reply) and a ``ValidationException`` with reason ``INVALID_BLOCK_TOKEN`` once one has expired;
  :class:`EbsApi` then lists again (see :meth:`EbsApi.fetch`).
- ``ListChangedBlocks`` (``FirstSnapshotId``, ``SecondSnapshotId``; paginated like the listing,
  ``MaxResults`` 100..10000, ``NextToken`` until absent; a page may hold fewer blocks than asked, even
  none) gives the blocks that differ between two snapshots *of the same volume/snapshot lineage*:
  each with ``FirstBlockToken`` (absent when the first snapshot does not have the block) and
  ``SecondBlockToken`` (absent when the second one does not: it reads as zeros there). Snapshots of
  different lineages are refused with a ``ValidationException``, reason ``UNRELATED_SNAPSHOTS``
  (botocore's model lists the reason; the message text is AWS's own). Its tokens expire as the
  listing's do; :meth:`EbsApi.changed_since` keeps only the indexes (blocks are fetched with the
  second snapshot's own listing, which is listed again when its tokens expire).
- ``GetSnapshotBlock`` (index + token) returns the block's data, its length and a SHA256 checksum
  (base64). The data is read with a bound (one block and a byte) and checked against both.

Throttling (``ThrottlingException``, ``RequestThrottledException``), 5xx replies, dropped connections
and a checksum that does not match are retried with capped exponential backoff and full jitter, as
the API reference asks; botocore's own retries are off for this client so that every attempt is
counted here. A throttled answer also halves the number of calls in flight (the API's
:class:`~imagelint.aws.call_window.CallWindow`; answers grow it back). Anything else ends the read
with one line naming the API, the code and what to check: an ``AccessDeniedException`` says which
permissions (and that a snapshot of another account, shared or public, must be copied into this one
first), a ``ResourceNotFoundException`` says the snapshot is not in that region or is another
account's. Both are :class:`imagelint.aws.errors.AwsError`: exit 3,
the image was not read.
"""

from __future__ import annotations

import base64
import hashlib
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import field
from datetime import UTC, datetime, timedelta
from typing import Any

from imagelint.aws.call_window import CallWindow
from imagelint.aws.errors import AwsError, no_credentials
from imagelint.aws.signals import sdk_call
from imagelint.records import dataclass

DEFAULT_WINDOW = 16  # calls in flight at most, unless the reader gives its own window
BLOCK_SIZE = 524288  # the EBS direct APIs' block and index unit (512 KiB), fixed by the API
GIB = 1024**3
LIST_PAGE = 10000  # the largest MaxResults the API accepts
MAX_PAGES = 100_000  # a 64 TiB volume has 131072 blocks: 14 full pages; anything near this is a loop
TOKEN_MARGIN = timedelta(minutes=5)  # list again this long before the listed ExpiryTime

THROTTLING = frozenset({"ThrottlingException", "RequestThrottledException", "Throttling", "SlowDown"})
_PERMISSIONS = (
    "IAM permissions ebs:ListSnapshotBlocks and ebs:GetSnapshotBlock (ebs:ListChangedBlocks for a diff)"
)
HINTS: dict[str, str] = {
    "AccessDeniedException": f"{_PERMISSIONS} for the caller, kms:Decrypt on the key of an encrypted "
    "snapshot, and that the snapshot is this account's (another account's, shared or public, cannot be "
    "read through the EBS direct APIs: copy it into this account first, aws ec2 copy-snapshot)",
    "ResourceNotFoundException": "the snapshot id and --region; a snapshot of another account (shared "
    "or public) cannot be read through the EBS direct APIs: copy it into this account first "
    "(aws ec2 copy-snapshot)",
    "ValidationException": "the snapshot id; the snapshot must be completed (not pending)",
    "ServiceQuotaExceededException": "the EBS direct APIs quotas of the account (Service Quotas)",
}
REASON_HINTS: dict[str, str] = {  # ValidationException's modeled reasons that need their own words
    "UNRELATED_SNAPSHOTS": "that both snapshots are of one volume/snapshot lineage",
}


class ChecksumMismatch(Exception):
    """A block's data does not match its length or SHA256 checksum (retried, then fatal)."""


@dataclass(frozen=True)
class RetryPolicy:
    """Capped exponential backoff with full jitter (seconds)."""

    attempts: int = 8
    base: float = 0.2
    cap: float = 10.0

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.cap, self.base * 2**attempt))


@dataclass(frozen=True)
class BlockMap:
    """What one listing said: the allocated blocks and their tokens."""

    volume_bytes: int
    tokens: dict[int, str]
    expires: datetime | None
    listed_block_size: int


@dataclass(frozen=True)
class ChangedBlocks:
    """What ListChangedBlocks said: each block that differs, with the second snapshot's token (None:
    the second snapshot does not have the block, it reads as zeros there)."""

    first_snapshot_id: str
    volume_bytes: int
    changed: dict[int, str | None]


@dataclass
class ApiCounters:
    """Counted under the lock: every request and every retry."""

    list_requests: int = 0
    changed_requests: int = 0
    get_requests: int = 0
    retries: int = 0
    throttled: int = 0
    checksum_retries: int = 0
    relists: int = 0


@dataclass
class EbsApi:
    """ListSnapshotBlocks and GetSnapshotBlock for one snapshot; thread-safe (one client, many threads)."""

    client: Any
    snapshot_id: str
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    counters: ApiCounters = field(default_factory=ApiCounters)
    # calls in flight, lowered while AWS throttles (shared by the readers of one account's quota)
    window: CallWindow = field(default_factory=lambda: CallWindow(DEFAULT_WINDOW))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _map: BlockMap | None = None
    _generation: int = 0

    # --- listing ----------------------------------------------------------------------------------

    def blocks(self) -> BlockMap:
        """The current listing (listed on first use, again when its tokens are about to expire)."""
        with self._lock:
            current = self._map
        if current is None or self._expiring(current):
            return self._relist(self._generation)
        return current

    def listed(self) -> BlockMap | None:
        """The listing in hand (None: not listed yet); never lists."""
        with self._lock:
            return self._map

    def _expiring(self, listing: BlockMap) -> bool:
        return listing.expires is not None and self.now() >= listing.expires - TOKEN_MARGIN

    def _relist(self, seen_generation: int) -> BlockMap:
        """List again unless another thread already did since ``seen_generation``."""
        with self._lock:
            if self._map is not None and self._generation != seen_generation:
                return self._map
        listing = self._list()
        with self._lock:
            if self._map is not None:
                self.counters.relists += 1
            self._map = listing
            self._generation += 1
            return listing

    def _list(self) -> BlockMap:
        tokens: dict[int, str] = {}
        volume_gib = 0
        expires: datetime | None = None
        params: dict[str, Any] = {"SnapshotId": self.snapshot_id}
        for reply in self._pages(
            "ListSnapshotBlocks", self.client.list_snapshot_blocks, params, "list_requests"
        ):
            volume_gib = int(reply.get("VolumeSize") or volume_gib)
            if reply.get("ExpiryTime") is not None:
                page_expiry = _aware(reply["ExpiryTime"])
                expires = page_expiry if expires is None else min(expires, page_expiry)
            for block in reply.get("Blocks", []):
                tokens[int(block["BlockIndex"])] = str(block["BlockToken"])
        volume_bytes = volume_gib * GIB
        self._in_volume("ListSnapshotBlocks", tokens, volume_bytes)
        return BlockMap(volume_bytes, tokens, expires, BLOCK_SIZE)

    def changed_since(self, first_snapshot_id: str) -> ChangedBlocks:
        """ListChangedBlocks from ``first_snapshot_id`` to this snapshot, every page. An error (the
        snapshots are unrelated, the permission is missing) is the :class:`AwsError` it is."""
        changed: dict[int, str | None] = {}
        volume_gib = 0
        params: dict[str, Any] = {"FirstSnapshotId": first_snapshot_id, "SecondSnapshotId": self.snapshot_id}
        pages = self._pages("ListChangedBlocks", self.client.list_changed_blocks, params, "changed_requests")
        for reply in pages:
            volume_gib = int(reply.get("VolumeSize") or volume_gib)
            for block in reply.get("ChangedBlocks", []):
                second = block.get("SecondBlockToken")
                changed[int(block["BlockIndex"])] = None if second is None else str(second)
        volume_bytes = volume_gib * GIB
        self._in_volume("ListChangedBlocks", changed, volume_bytes)
        return ChangedBlocks(first_snapshot_id, volume_bytes, changed)

    def _pages(
        self, api: str, func: Callable[..., Any], params: dict[str, Any], counter: str
    ) -> Iterator[dict[str, Any]]:
        """Every page of a paginated listing (``MaxResults`` the largest allowed, ``NextToken`` until
        absent), each checked for the API's block size."""
        page = {**params, "MaxResults": LIST_PAGE}
        for _ in range(MAX_PAGES):
            with self._lock:
                setattr(self.counters, counter, getattr(self.counters, counter) + 1)
            reply: dict[str, Any] = self._call(api, func, page)
            block_size = int(reply.get("BlockSize") or 0)
            if block_size != BLOCK_SIZE:
                raise AwsError(
                    "ebs",
                    api,
                    "UnexpectedBlockSize",
                    f"{self.snapshot_id}: BlockSize {block_size}, the EBS direct APIs use {BLOCK_SIZE}",
                    "that the endpoint implements the EBS direct APIs",
                )
            yield reply
            token = reply.get("NextToken")
            if not token:
                return
            page = {**params, "MaxResults": LIST_PAGE, "NextToken": token}
        raise AwsError("ebs", api, "TooManyPages", f"more than {MAX_PAGES} pages")

    def _in_volume(self, api: str, indexes: Iterable[int], volume_bytes: int) -> None:
        beyond = [i for i in indexes if (i + 1) * BLOCK_SIZE > volume_bytes]
        if beyond:
            raise AwsError(
                "ebs",
                api,
                "BlockOutOfRange",
                f"{self.snapshot_id}: block {beyond[0]} lies beyond the {volume_bytes // GIB} GiB volume",
                "that the endpoint implements the EBS direct APIs",
            )

    # --- one block --------------------------------------------------------------------------------

    def fetch(self, index: int) -> bytes:
        """The verified data of one allocated block. An expired token makes it list again, once."""
        for relisted in (False, True):
            token = self.blocks().tokens[index]
            with self._lock:
                generation = self._generation
            try:
                return self._fetch(index, token)
            except AwsError as exc:
                if relisted or not _token_expired(exc):
                    raise
                self._relist(generation)
                if index not in self.blocks().tokens:
                    raise AwsError(
                        "ebs",
                        "ListSnapshotBlocks",
                        "BlockVanished",
                        f"{self.snapshot_id}: block {index} is no longer listed after its token expired",
                        "that the snapshot was not replaced while it was read",
                    ) from None
        raise AssertionError("unreachable")

    def _fetch(self, index: int, token: str) -> bytes:
        params = {"SnapshotId": self.snapshot_id, "BlockIndex": index, "BlockToken": token}

        def get() -> bytes:
            with self._lock:
                self.counters.get_requests += 1
            reply = self.client.get_snapshot_block(**params)
            return verified(reply, index)

        data: bytes = self._call("GetSnapshotBlock", lambda **_: get(), params)
        return data

    # --- retries ----------------------------------------------------------------------------------

    def _call(self, api: str, func: Callable[..., Any], params: dict[str, Any]) -> Any:
        from botocore.exceptions import (
            ClientError,
            ConnectionError,
            HTTPClientError,
            IncompleteReadError,
            NoCredentialsError,
            ReadTimeoutError,
            ResponseStreamingError,
        )

        transient = (ConnectionError, HTTPClientError, IncompleteReadError, ReadTimeoutError)
        last: Exception | None = None
        for attempt in range(self.retry.attempts):
            if attempt:
                with self._lock:
                    self.counters.retries += 1
                self.sleep(self.retry.delay(attempt))
            try:
                with self.window.slot() as started, sdk_call():
                    answer = func(**params)
                self.window.answered()
                return answer
            except NoCredentialsError:
                raise no_credentials("ebs", api) from None
            except ClientError as exc:
                code = _code(exc)
                status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
                if code in THROTTLING or status == 429:
                    self.window.throttled(started)
                    with self._lock:
                        self.counters.throttled += 1
                elif status < 500:
                    raise self._error(api, exc) from None
                last = exc
            except ChecksumMismatch as exc:
                with self._lock:
                    self.counters.checksum_retries += 1
                last = exc
            except (*transient, ResponseStreamingError) as exc:
                last = exc
        raise self._gave_up(api, last)

    def _error(self, api: str, exc: Any) -> AwsError:
        code = _code(exc)
        error = exc.response.get("Error", {})
        reason = exc.response.get("Reason") or error.get("Reason")
        detail = " ".join(str(error.get("Message") or code).split())[:300]
        if reason:
            detail += f" (reason {reason})"
        hint = REASON_HINTS.get(str(reason)) or HINTS.get(code, _PERMISSIONS)
        failure = AwsError("ebs", api, code, f"{self.snapshot_id}: {detail}", hint)
        failure.reason = str(reason or "")  # type: ignore[attr-defined]
        return failure

    def _gave_up(self, api: str, last: Exception | None) -> AwsError:
        attempts = self.retry.attempts
        if isinstance(last, ChecksumMismatch):
            return AwsError(
                "ebs",
                api,
                "ChecksumMismatch",
                f"{self.snapshot_id}: {last} ({attempts} attempts)",
                "the network path to the EBS endpoint (a proxy rewriting replies?)",
            )
        error = getattr(last, "response", None)
        if error is not None:
            failure = self._error(api, last)
            failure.args = (f"{failure} after {attempts} attempts",)
            return failure
        return AwsError(
            "ebs",
            api,
            type(last).__name__,
            f"{self.snapshot_id}: {' '.join(str(last).split())[:300]} ({attempts} attempts)",
            "network access to the EBS endpoint of the region",
        )


def verified(reply: dict[str, Any], index: int) -> bytes:
    """Read a GetSnapshotBlock reply's data (bounded) and check its length and SHA256 checksum."""
    body = reply["BlockData"]
    try:
        data = body.read(BLOCK_SIZE + 1)
    finally:
        body.close()
    length = reply.get("DataLength")
    if len(data) != BLOCK_SIZE or (length is not None and int(length) != len(data)):
        raise ChecksumMismatch(f"block {index}: {len(data)} bytes (DataLength {length}), not {BLOCK_SIZE}")
    algorithm = reply.get("ChecksumAlgorithm")
    if algorithm != "SHA256":
        raise ChecksumMismatch(f"block {index}: checksum algorithm {algorithm!r}, expected SHA256")
    expected = reply.get("Checksum") or ""
    actual = base64.b64encode(hashlib.sha256(data).digest()).decode()
    if actual != expected:
        raise ChecksumMismatch(f"block {index}: SHA256 {actual} does not match the reply's {expected}")
    return bytes(data)


def _code(exc: Any) -> str:
    error = exc.response.get("Error", {})
    return str(error.get("Code") or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode"))


def _token_expired(exc: AwsError) -> bool:
    reason = getattr(exc, "reason", "")
    return exc.code == "ValidationException" and (
        reason == "INVALID_BLOCK_TOKEN" or "expired" in exc.detail.lower()
    )


def _aware(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromtimestamp(float(value), UTC)
