"""Contract tests: every EBS direct API request imagelint makes, validated by botocore's Stubber
against the real service model (parameter names, types, required members, ranges), and the reply
shapes AWS documents (pagination, ExpiryTime, modeled error fields such as ``Reason``)."""

from __future__ import annotations

import base64
import hashlib
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from imagelint.aws import ebs_reuse
from imagelint.aws.block_store import BlockStore
from imagelint.aws.ebs_api import BLOCK_SIZE, LIST_PAGE, EbsApi, RetryPolicy
from imagelint.aws.ebs_blocks import SnapshotStream
from imagelint.aws.errors import AwsError

SNAP = "snap-0123456789abcdef0"
REGION = "us-east-1"
NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


@pytest.fixture
def stubbed() -> Any:
    client = boto3.client("ebs", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def api(client: Any, **kwargs: Any) -> EbsApi:
    return EbsApi(
        client, SNAP, retry=RetryPolicy(attempts=3), sleep=lambda _: None, now=lambda: NOW, **kwargs
    )


def listing(
    blocks: dict[int, str], *, next_token: str | None = None, expires: datetime | None = None
) -> dict:
    reply: dict[str, Any] = {
        "Blocks": [{"BlockIndex": i, "BlockToken": t} for i, t in blocks.items()],
        "VolumeSize": 8,
        "BlockSize": BLOCK_SIZE,
        "ExpiryTime": expires or NOW + timedelta(days=7),
    }
    if next_token:
        reply["NextToken"] = next_token
    return reply


def block_reply(data: bytes, checksum: str | None = None) -> dict[str, Any]:
    return {
        "BlockData": StreamingBody(io.BytesIO(data), len(data)),
        "DataLength": len(data),
        "Checksum": checksum or base64.b64encode(hashlib.sha256(data).digest()).decode(),
        "ChecksumAlgorithm": "SHA256",
    }


def list_params(token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"SnapshotId": SNAP, "MaxResults": LIST_PAGE}
    if token:
        params["NextToken"] = token
    return params


def test_listing_follows_next_token_across_pages(stubbed: Any) -> None:
    client, stub = stubbed
    stub.add_response(
        "list_snapshot_blocks", listing({0: "AAAA", 1: "AAAB"}, next_token="page2"), list_params()
    )
    stub.add_response("list_snapshot_blocks", listing({9: "AAAC"}), list_params("page2"))
    blocks = api(client).blocks()
    assert blocks.tokens == {0: "AAAA", 1: "AAAB", 9: "AAAC"}
    assert blocks.volume_bytes == 8 * 1024**3


def test_get_sends_index_and_token_and_checks_the_checksum(stubbed: Any) -> None:
    client, stub = stubbed
    data = bytes(range(256)) * (BLOCK_SIZE // 256)
    stub.add_response("list_snapshot_blocks", listing({3: "dG9rZW4="}), list_params())
    expected = {"SnapshotId": SNAP, "BlockIndex": 3, "BlockToken": "dG9rZW4="}
    stub.add_response("get_snapshot_block", block_reply(data), expected)
    stream = SnapshotStream(api(client), concurrency=1)
    stream.seek(3 * BLOCK_SIZE + 5)
    assert stream.read(3) == data[5:8]
    stream.close()


def test_a_wrong_checksum_is_retried_then_fatal(stubbed: Any) -> None:
    client, stub = stubbed
    data = b"\1" * BLOCK_SIZE
    stub.add_response("list_snapshot_blocks", listing({0: "AAAA"}), list_params())
    for _ in range(3):
        stub.add_response("get_snapshot_block", block_reply(data, checksum="AAAA"))
    with pytest.raises(AwsError, match="ChecksumMismatch") as failed:
        api(client).fetch(0)
    assert "3 attempts" in str(failed.value)


def test_a_short_block_is_refused(stubbed: Any) -> None:
    client, stub = stubbed
    stub.add_response("list_snapshot_blocks", listing({0: "AAAA"}), list_params())
    for _ in range(3):
        stub.add_response("get_snapshot_block", block_reply(b"\1" * 1000))
    with pytest.raises(AwsError, match="1000 bytes"):
        api(client).fetch(0)


def test_throttling_is_retried_with_backoff(stubbed: Any) -> None:
    client, stub = stubbed
    data = b"\2" * BLOCK_SIZE
    stub.add_response("list_snapshot_blocks", listing({0: "AAAA"}), list_params())
    stub.add_client_error(
        "get_snapshot_block",
        "RequestThrottledException",
        "rate exceeded",
        400,
        modeled_fields={"Reason": "ACCOUNT_THROTTLED"},
    )
    stub.add_client_error("get_snapshot_block", "ThrottlingException", "slow down", 400)
    stub.add_client_error("get_snapshot_block", "InternalServerException", "oops", 500)
    stub.add_response("get_snapshot_block", block_reply(data))
    delays: list[float] = []
    ebs = EbsApi(client, SNAP, retry=RetryPolicy(attempts=4, base=1.0, cap=100), sleep=delays.append)
    assert ebs.fetch(0) == data
    assert ebs.counters.throttled == 2 and ebs.counters.retries == 3
    assert len(delays) == 3 and all(0 <= d <= 2**i for i, d in enumerate(delays, 1))


def test_an_expired_token_lists_again_and_uses_the_new_token(stubbed: Any) -> None:
    client, stub = stubbed
    data = b"\3" * BLOCK_SIZE
    stub.add_response("list_snapshot_blocks", listing({4: "b2xk"}), list_params())
    stub.add_client_error(
        "get_snapshot_block",
        "ValidationException",
        "The block token has expired.",
        400,
        modeled_fields={"Reason": "INVALID_BLOCK_TOKEN"},
        expected_params={"SnapshotId": SNAP, "BlockIndex": 4, "BlockToken": "b2xk"},
    )
    stub.add_response("list_snapshot_blocks", listing({4: "bmV3"}), list_params())
    stub.add_response(
        "get_snapshot_block", block_reply(data), {"SnapshotId": SNAP, "BlockIndex": 4, "BlockToken": "bmV3"}
    )
    ebs = api(client)
    assert ebs.fetch(4) == data
    assert ebs.counters.relists == 1


def test_tokens_near_their_expiry_time_are_listed_again_before_use(stubbed: Any) -> None:
    client, stub = stubbed
    stub.add_response("list_snapshot_blocks", listing({0: "AAAA"}, expires=NOW + timedelta(minutes=1)))
    stub.add_response("list_snapshot_blocks", listing({0: "AAAB"}))
    stub.add_response(
        "get_snapshot_block",
        block_reply(b"\4" * BLOCK_SIZE),
        {"SnapshotId": SNAP, "BlockIndex": 0, "BlockToken": "AAAB"},
    )
    ebs = api(client)
    ebs.blocks()
    assert ebs.fetch(0) == b"\4" * BLOCK_SIZE


@pytest.mark.parametrize(
    ("code", "status", "reason", "says"),
    [
        ("AccessDeniedException", 403, "UNAUTHORIZED_ACCOUNT", "kms:Decrypt"),
        ("ResourceNotFoundException", 404, "SNAPSHOT_NOT_FOUND", "--region"),
        ("ValidationException", 400, "INVALID_SNAPSHOT_ID", "completed"),
    ],
)
def test_errors_are_one_line_with_what_to_check(
    stubbed: Any, code: str, status: int, reason: str, says: str
) -> None:
    client, stub = stubbed
    stub.add_client_error(
        "list_snapshot_blocks",
        code,
        "no",
        status,
        modeled_fields={"Reason": reason},
        expected_params=list_params(),
    )
    with pytest.raises(AwsError) as failed:
        api(client).blocks()
    message = str(failed.value)
    assert message.startswith(f"ebs ListSnapshotBlocks failed: {code}: {SNAP}: no (reason {reason})")
    assert says in message and "\n" not in message
    # another account's snapshot (shared or public) is not readable: copy it, not "share" it
    assert ("copy-snapshot" in message) == (code != "ValidationException")


def test_a_block_size_other_than_512_kib_is_refused(stubbed: Any) -> None:
    client, stub = stubbed
    stub.add_response("list_snapshot_blocks", {**listing({0: "AAAA"}), "BlockSize": 512})
    with pytest.raises(AwsError, match="BlockSize 512"):
        api(client).blocks()


def test_a_block_beyond_the_volume_is_refused(stubbed: Any) -> None:
    client, stub = stubbed
    stub.add_response("list_snapshot_blocks", listing({8 * 2048: "AAAA"}))
    with pytest.raises(AwsError, match="beyond the 8 GiB volume"):
        api(client).blocks()


OLD = "snap-0aaaaaaaaaaaaaaaa"


def changed_params(token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"FirstSnapshotId": OLD, "SecondSnapshotId": SNAP, "MaxResults": LIST_PAGE}
    if token:
        params["NextToken"] = token
    return params


def changed_page(blocks: dict[int, tuple[str | None, str | None]], next_token: str | None = None) -> dict:
    reply: dict[str, Any] = {
        "ChangedBlocks": [
            {
                "BlockIndex": i,
                **({"FirstBlockToken": first} if first else {}),
                **({"SecondBlockToken": second} if second else {}),
            }
            for i, (first, second) in blocks.items()
        ],
        "VolumeSize": 8,
        "BlockSize": BLOCK_SIZE,
        "ExpiryTime": NOW + timedelta(days=7),
    }
    if next_token:
        reply["NextToken"] = next_token
    return reply


def test_changed_blocks_follow_next_token_and_keep_what_the_second_snapshot_has(stubbed: Any) -> None:
    client, stub = stubbed
    stub.add_response("list_changed_blocks", changed_page({1: ("AAAA", "AAAB")}, "page2"), changed_params())
    page2 = changed_page({5: (None, "AAAC"), 7: ("AAAD", None)})  # written in SNAP; gone from SNAP
    stub.add_response("list_changed_blocks", page2, changed_params("page2"))
    listing_ = api(client).changed_since(OLD)
    assert listing_.changed == {1: "AAAB", 5: "AAAC", 7: None}
    assert listing_.volume_bytes == 8 * 1024**3


def test_unrelated_snapshots_are_an_error_with_their_reason(stubbed: Any) -> None:
    client, stub = stubbed
    stub.add_client_error(
        "list_changed_blocks",
        "ValidationException",
        "not of the same lineage",
        400,
        modeled_fields={"Reason": "UNRELATED_SNAPSHOTS"},
        expected_params=changed_params(),
    )
    with pytest.raises(AwsError) as failed:
        api(client).changed_since(OLD)
    assert getattr(failed.value, "reason", "") == "UNRELATED_SNAPSHOTS"
    assert "one volume/snapshot lineage" in str(failed.value) and "\n" not in str(failed.value)


def test_new_reads_changed_blocks_from_itself_and_the_rest_from_olds_kept_blocks(
    stubbed: Any, tmp_path: Path
) -> None:
    first_diff(stubbed, tmp_path)


def first_diff(stubbed: Any, tmp_path: Path) -> tuple[bytes, bytes]:
    """OLD read (block 0 fetched), NEW through it (block 2 fetched): the blocks, kept in the store."""
    client, stub = stubbed
    kept, changed = b"\5" * BLOCK_SIZE, b"\6" * BLOCK_SIZE
    old_api = EbsApi(client, OLD, sleep=lambda _: None, now=lambda: NOW)
    stub.add_response(
        "list_snapshot_blocks", {**listing({0: "T0", 1: "T1"})}, {**list_params(), "SnapshotId": OLD}
    )
    stub.add_response(
        "get_snapshot_block", block_reply(kept), {"SnapshotId": OLD, "BlockIndex": 0, "BlockToken": "T0"}
    )
    shared = ebs_reuse.SharedBlocks(store=BlockStore(tmp_path / "blocks"))
    base = shared.reader(ebs_reuse.OLD, REGION)(old_api)
    assert base.fetch(0) == kept
    stub.add_response(
        "list_changed_blocks", changed_page({1: ("T1", "U1"), 2: (None, "U2")}), changed_params()
    )
    stub.add_response("list_snapshot_blocks", listing({0: "U0", 1: "U1", 2: "U2"}), list_params())
    new = shared.reader(ebs_reuse.NEW, REGION)(api(client))
    stub.add_response(
        "get_snapshot_block", block_reply(changed), {"SnapshotId": SNAP, "BlockIndex": 2, "BlockToken": "U2"}
    )
    assert new.fetch(0) == kept  # unchanged: OLD's, no request (the Stubber refuses any it was not given)
    assert new.fetch(2) == changed
    assert not list((tmp_path / "blocks").glob("*.ref"))  # held until the reads are over
    new.flush()  # as each snapshot's stream does when it closes (imagelint.aws.snapshot.open_stream)
    assert len(list((tmp_path / "blocks").glob("*.ref"))) == 3  # OLD's 0, NEW's 0 and 2
    assert len(list((tmp_path / "blocks").glob("*.blk"))) == 2  # NEW's 0 is OLD's data: one copy
    assert new.facts() == {
        "mode": "incremental",
        "base_snapshot_id": OLD,
        "fallback": None,
        "changed_blocks": 2,
        "fetched": [2],
        "reused": [0],
        "base_fetched": [],
        "stored": [],
    }
    return kept, changed


def test_the_next_run_reads_new_through_olds_stored_blocks_when_olds_audit_is_cached(
    stubbed: Any, tmp_path: Path
) -> None:
    """The pipeline's next gate: OLD's audit came from the audit cache (OLD not read), its blocks and
    NEW's from the block store; only NEW's listing and ListChangedBlocks are asked for (OLD's listing
    is the one the first run kept: the Stubber refuses any call it was not given)."""
    client, stub = stubbed
    kept, changed = first_diff(stubbed, tmp_path)
    assert len(list((tmp_path / "blocks").glob("*.lst"))) == 2  # OLD's and NEW's listings, kept
    shared = ebs_reuse.SharedBlocks(store=BlockStore(tmp_path / "blocks"))
    shared.remember(ebs_reuse.OLD, REGION, OLD)
    stub.add_response(
        "list_changed_blocks", changed_page({1: ("T1", "U1"), 2: (None, "U2")}), changed_params()
    )
    stub.add_response("list_snapshot_blocks", listing({0: "U0", 1: "U1", 2: "U2"}), list_params())
    new = shared.reader(ebs_reuse.NEW, REGION)(api(client))
    assert new.fetch(0) == kept and new.fetch(2) == changed  # no GetSnapshotBlock: both from the store
    facts = new.facts()
    assert facts["mode"] == "incremental" and facts["fallback"] is None
    assert facts["fetched"] == [] and facts["reused"] == [0] and facts["stored"] == [0, 2]


def test_news_changed_blocks_olds_walk_read_are_the_likely_ones(stubbed: Any, tmp_path: Path) -> None:
    """NEW's changed blocks worth fetching at once: those the walk of OLD read, in this run or (its
    audit cached) an earlier one, as the store says; not those it never read, nor removed ones."""
    client, stub = stubbed
    old_api = EbsApi(client, OLD, sleep=lambda _: None, now=lambda: NOW)
    tokens = {0: "T0", 1: "T1", 3: "T3"}
    stub.add_response("list_snapshot_blocks", listing(tokens), {**list_params(), "SnapshotId": OLD})
    for i in (1, 3):
        data = bytes([i]) * BLOCK_SIZE
        params = {"SnapshotId": OLD, "BlockIndex": i, "BlockToken": tokens[i]}
        stub.add_response("get_snapshot_block", block_reply(data), params)
    shared = ebs_reuse.SharedBlocks(store=BlockStore(tmp_path / "blocks"))
    base = shared.reader(ebs_reuse.OLD, REGION)(old_api)
    base.fetch(1)
    base.fetch(3)  # OLD's walk read 1 and 3, not 0
    changes = changed_page({0: ("T0", "U0"), 1: ("T1", "U1"), 2: (None, "U2"), 3: ("T3", None)})
    new_listing = listing({0: "U0", 1: "U1", 2: "U2"})
    stub.add_response("list_changed_blocks", changes, changed_params())
    stub.add_response("list_snapshot_blocks", new_listing, list_params())
    new = shared.reader(ebs_reuse.NEW, REGION)(api(client))
    assert isinstance(new, ebs_reuse.ChangedOverBase) and new.likely() == [1]  # 3: NEW has it no more
    base.flush()
    warm = ebs_reuse.SharedBlocks(store=BlockStore(tmp_path / "blocks"))
    warm.remember(ebs_reuse.OLD, REGION, OLD)  # the next run: OLD's audit cached, its walk in the store
    stub.add_response("list_changed_blocks", changes, changed_params())
    stub.add_response("list_snapshot_blocks", new_listing, list_params())  # OLD's: as kept
    again = warm.reader(ebs_reuse.NEW, REGION)(api(client))
    assert isinstance(again, ebs_reuse.ChangedOverBase) and again.likely() == [1]


def test_olds_listing_kept_in_the_store_is_checked_like_its_own(stubbed: Any, tmp_path: Path) -> None:
    """OLD's kept listing stands in for ListSnapshotBlocks only as it was: a damaged one is a miss
    (OLD listed again), and one that disagrees with the changes reads NEW in full, as OLD's own would."""
    client, stub = stubbed
    first_diff(stubbed, tmp_path)
    store = BlockStore(tmp_path / "blocks")
    assert store.get_listing(REGION, OLD) == (8 * 1024**3, frozenset({0, 1}))
    path = tmp_path / "blocks" / store.listing_entry(f"{REGION}:{OLD}")
    path.write_bytes(path.read_bytes()[:-1] + b"7")  # one index off: its authentication fails
    assert store.get_listing(REGION, OLD) is None and not path.exists()
    store.put_listing(REGION, OLD, 8 * 1024**3, {0, 1, 5})  # 5: neither in NEW nor among the changes
    shared = ebs_reuse.SharedBlocks(store=store)
    shared.remember(ebs_reuse.OLD, REGION, OLD)
    stub.add_response(
        "list_changed_blocks", changed_page({1: ("T1", "U1"), 2: (None, "U2")}), changed_params()
    )
    stub.add_response("list_snapshot_blocks", listing({0: "U0", 1: "U1", 2: "U2"}), list_params())
    fallback = shared.reader(ebs_reuse.NEW, REGION)(api(client)).facts()["fallback"]
    assert "ListChangedBlocks disagrees with the snapshots' own block listings" in str(fallback)


def test_new_read_in_full_always_says_why(stubbed: Any) -> None:
    client, _ = stubbed
    shared = ebs_reuse.SharedBlocks(store=None)  # OLD was no snapshot
    new = shared.reader(ebs_reuse.NEW, REGION)(api(client))
    assert new.facts()["mode"] == "full" and "OLD is not an EBS snapshot" in str(new.facts()["fallback"])
    other = ebs_reuse.SharedBlocks(store=None)
    other.remember(ebs_reuse.OLD, "eu-west-1", OLD)  # OLD's audit cached, in another region
    fallback = other.reader(ebs_reuse.NEW, REGION)(api(client)).facts()["fallback"]
    assert f"OLD {OLD} is in eu-west-1, NEW in {REGION}" in str(fallback)
