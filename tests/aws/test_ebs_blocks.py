"""The snapshot stream against moto's EBS direct API (through the fault-injecting front).

A sparse 1 GiB image with random data in a few blocks is written to a snapshot as uploaders do
(zero blocks skipped); the stream must read back the image's bytes exactly at any offset, zeros in
the holes without a request, and survive or report the faults AWS documents.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagelint.aws.clients import Clients
from imagelint.aws.ebs_api import BLOCK_SIZE, EbsApi, RetryPolicy
from imagelint.aws.ebs_blocks import SnapshotStream
from imagelint.aws.errors import AwsError
from imagelint.errors import ExitCode
from tests.aws.ebs_upload import upload_image
from tests.aws.moto_env import REGION, MotoEnv
from tests.support import wait_for

WRITTEN = [0, 1, 2, 5, 6, 7, 8, 9, 10, 11, 12, 100, 2047]
FAST = RetryPolicy(attempts=4, base=0.001, cap=0.01)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ebs") / "sparse.img"
    rng = random.Random(13)
    with path.open("wb") as f:
        f.truncate(1024**3)
        for index in WRITTEN:
            f.seek(index * BLOCK_SIZE)
            f.write(rng.randbytes(BLOCK_SIZE))
        f.seek(100 * BLOCK_SIZE + 4096)  # a block that is partly zero stays one block
        f.write(bytes(8192))
    return path


@pytest.fixture(scope="module")
def aws(image: Path) -> Iterator[tuple[MotoEnv, str]]:
    with MotoEnv() as env:
        snapshot_id, written = upload_image(env.client("ebs", direct=True), image)
        assert written == len(WRITTEN)
        yield env, snapshot_id


@pytest.fixture
def env(aws: tuple[MotoEnv, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoEnv]:
    moto, _ = aws
    for key, value in moto.env.items():
        monkeypatch.setenv(key, value)
    moto.ebs.reset()
    yield moto
    moto.ebs.reset()


def stream(aws: tuple[MotoEnv, str], **kwargs: int) -> SnapshotStream:
    api = EbsApi(Clients(REGION).ebs(16), aws[1], retry=FAST)
    return SnapshotStream(api, **kwargs)


def test_random_reads_equal_the_image(env: MotoEnv, aws: tuple[MotoEnv, str], image: Path) -> None:
    rng = random.Random(7)
    data = image.read_bytes()
    with stream(aws) as s:
        assert s.size == len(data) == 1024**3
        assert s.allocated == WRITTEN
        for _ in range(300):
            index = rng.choice([*WRITTEN, 3, 4, 50, 2046])
            offset = index * BLOCK_SIZE + rng.randrange(BLOCK_SIZE)
            length = rng.choice([1, 17, 4096, BLOCK_SIZE, 3 * BLOCK_SIZE + 5])
            s.seek(offset)
            assert s.read(length) == data[offset : offset + length], (offset, length)
        s.seek(-10, os.SEEK_END)
        assert s.read(100) == data[-10:]
        assert s.read(1) == b""
        stats = s.stats()
    assert stats["blocks_listed"] == len(WRITTEN)
    assert stats["blocks_fetched"] == len(set(env.ebs.gets)) <= len(WRITTEN)
    assert stats["cache_hits"] > 0
    assert stats["bytes_fetched"] == stats["blocks_fetched"] * BLOCK_SIZE


def test_holes_read_as_zeros_without_a_request(env: MotoEnv, aws: tuple[MotoEnv, str]) -> None:
    with stream(aws) as s:
        s.seek(3 * BLOCK_SIZE)
        assert s.read(2 * BLOCK_SIZE) == bytes(2 * BLOCK_SIZE)
        s.seek(1000 * BLOCK_SIZE + 123)
        assert s.read(999) == bytes(999)
        assert s.stats()["zero_block_reads"] == 3
        assert s.stats()["blocks_fetched"] == 0
    assert env.ebs.gets == []


def test_a_read_across_blocks_fetches_them_in_parallel(env: MotoEnv, aws: tuple[MotoEnv, str]) -> None:
    env.ebs.latency = 0.2
    with stream(aws, concurrency=8, readahead=0) as s:
        s.seek(5 * BLOCK_SIZE)
        s.read(8 * BLOCK_SIZE)
        assert s.stats()["blocks_fetched"] == 8
    assert env.ebs.max_in_flight >= 4  # served at once, not one after another


def test_throttling_lowers_the_calls_in_flight(env: MotoEnv, aws: tuple[MotoEnv, str], image: Path) -> None:
    """An account quota of 3 calls in flight against a reader of 16 (the front throttles the rest):
    the window comes down to the quota or below and every block still reads back exactly."""
    env.ebs.latency, env.ebs.quota = 0.05, 3
    data = image.read_bytes()
    api = EbsApi(Clients(REGION).ebs(16), aws[1], retry=RetryPolicy(attempts=12, base=0.01, cap=0.1))
    with SnapshotStream(api, concurrency=16, readahead=0) as s:
        assert s.read(13 * BLOCK_SIZE) == data[: 13 * BLOCK_SIZE]  # 11 allocated blocks at once
        stats = s.stats()
    assert env.ebs.over_quota > 0 and stats["throttled"] == env.ebs.over_quota
    assert stats["concurrency"] == 16 and stats["concurrency_lowest"] <= 3 and api.window.cuts >= 2


def test_serial_when_concurrency_is_one(env: MotoEnv, aws: tuple[MotoEnv, str]) -> None:
    env.ebs.latency = 0.05
    with stream(aws, concurrency=1) as s:
        s.seek(5 * BLOCK_SIZE)
        s.read(8 * BLOCK_SIZE)
    assert env.ebs.max_in_flight == 1


def test_sequential_reads_read_ahead_random_reads_do_not(env: MotoEnv, aws: tuple[MotoEnv, str]) -> None:
    with stream(aws, readahead=4) as s:
        s.seek(5 * BLOCK_SIZE)
        for _ in range(16):
            s.read(BLOCK_SIZE // 4)  # 4 blocks, sequentially
        assert s.stats()["readahead_blocks"] > 0
    env.ebs.reset()
    with stream(aws, readahead=4) as s:
        for index in (12, 0, 100, 7, 2047):
            s.seek(index * BLOCK_SIZE + 10)
            s.read(100)
        assert s.stats()["readahead_blocks"] == 0
    assert sorted(env.ebs.gets) == [0, 7, 12, 100, 2047]


def test_cache_is_bounded(env: MotoEnv, aws: tuple[MotoEnv, str]) -> None:
    with stream(aws, cache_bytes=2 * BLOCK_SIZE, readahead=0) as s:
        for index in (5, 5, 6, 7, 8, 5):
            s.seek(index * BLOCK_SIZE)
            s.read(10)
        stats = s.stats()
    assert stats["cache_hits"] == 1  # the second read of 5; the last one came after eviction
    assert env.ebs.gets == [5, 6, 7, 8, 5]


def test_throttling_and_503_are_retried(env: MotoEnv, aws: tuple[MotoEnv, str], image: Path) -> None:
    env.ebs.throttle, env.ebs.unavailable = 2, 1
    with stream(aws) as s:
        s.seek(100 * BLOCK_SIZE)
        assert s.read(BLOCK_SIZE) == image.read_bytes()[100 * BLOCK_SIZE : 101 * BLOCK_SIZE]
        stats = s.stats()
    assert stats["throttled"] == 2
    assert stats["retries"] == 3


def test_a_corrupted_block_is_retried_then_refused(env: MotoEnv, aws: tuple[MotoEnv, str]) -> None:
    env.ebs.corrupt = 1
    with stream(aws) as s:
        s.seek(0)
        s.read(10)
        assert s.stats()["checksum_retries"] == 1
    env.ebs.corrupt = 100
    with stream(aws) as s, pytest.raises(OSError, match="ChecksumMismatch"):
        s.seek(BLOCK_SIZE)
        s.read(10)
    assert isinstance(s.failure, AwsError)
    assert s.failure.exit_code == ExitCode.INCONCLUSIVE
    assert "does not match" in str(s.failure)


def test_an_expired_token_lists_again(env: MotoEnv, aws: tuple[MotoEnv, str]) -> None:
    env.ebs.expire = 1
    with stream(aws) as s:
        lists = env.ebs.lists
        s.seek(2 * BLOCK_SIZE)
        assert len(s.read(10)) == 10
        assert s.stats()["relists"] == 1
    assert env.ebs.lists == lists + 1


def test_access_denied_says_what_to_check(env: MotoEnv, aws: tuple[MotoEnv, str]) -> None:
    env.ebs.deny = "list"
    with pytest.raises(AwsError) as denied:
        stream(aws)
    message = str(denied.value)
    assert "ebs ListSnapshotBlocks failed: AccessDeniedException" in message
    assert "ebs:GetSnapshotBlock" in message and "kms:Decrypt" in message and "shared" in message
    assert "\n" not in message
    env.ebs.deny = "get"
    with stream(aws) as s, pytest.raises(OSError, match="AccessDeniedException"):
        s.read(10)
    assert env.ebs.gets == [0]  # not retried


def test_not_found_names_the_region_and_sharing(env: MotoEnv, aws: tuple[MotoEnv, str]) -> None:
    env.ebs.not_found = True
    with pytest.raises(AwsError, match=r"ResourceNotFoundException.*SNAPSHOT_NOT_FOUND.*--region.*shared"):
        stream(aws)


def test_the_stream_is_read_only(env: MotoEnv, aws: tuple[MotoEnv, str]) -> None:
    with stream(aws) as s:
        assert s.readable() and s.seekable() and not s.writable()
        with pytest.raises(OSError):
            s.write(b"x")


# --- prefetch ---------------------------------------------------------------------------------------


def test_prefetch_requests_each_block_once_without_waiting(
    env: MotoEnv, aws: tuple[MotoEnv, str], image: Path
) -> None:
    """The blocks of the ranges are asked for at once and the call returns while the server still
    holds every reply; named twice, already cached, in flight or never written: not asked again."""
    data = image.read_bytes()
    env.ebs.hold = threading.Event()
    try:
        with stream(aws, readahead=0) as s:
            s.seek(12 * BLOCK_SIZE)
            threading.Thread(target=env.ebs.hold.set).start()  # the read's own block comes back
            assert s.read(10) == data[12 * BLOCK_SIZE : 12 * BLOCK_SIZE + 10]
            env.ebs.hold.clear()
            ranges = [
                (5 * BLOCK_SIZE + 10, 100),  # block 5
                (5 * BLOCK_SIZE, 3 * BLOCK_SIZE),  # 5 again, 6, 7
                (6 * BLOCK_SIZE + 1, 1),  # 6 again
                (3 * BLOCK_SIZE, 2 * BLOCK_SIZE),  # 3, 4: never written
                (12 * BLOCK_SIZE, 1),  # cached
                (100 * BLOCK_SIZE + BLOCK_SIZE - 1, 2),  # the last byte of 100 and the first of 101
                (s.size + 5, 10),  # past the end
            ]
            assert s.prefetch(ranges) == 4  # 5, 6, 7, 100, with every reply held
            assert s.stats()["blocks_fetched"] == 1
            assert s.prefetch(ranges) == 0  # in flight now
            env.ebs.hold.set()
            for index in (5, 6, 7, 100):
                s.seek(index * BLOCK_SIZE + 3)
                assert s.read(4096) == data[index * BLOCK_SIZE + 3 : index * BLOCK_SIZE + 4099]
            assert s.prefetch(ranges) == 0  # cached now
            stats = s.stats()
    finally:
        env.ebs.hold.set()
    assert sorted(env.ebs.gets) == [5, 6, 7, 12, 100]
    assert stats["prefetch_blocks"] == 4 and stats["prefetch_dropped"] == 0
    assert stats["prefetch_unread"] == 0
    assert stats["blocks_fetched"] == 5


def test_prefetch_fetches_in_parallel(env: MotoEnv, aws: tuple[MotoEnv, str]) -> None:
    env.ebs.hold = threading.Event()
    try:
        with stream(aws, concurrency=8, readahead=0) as s:
            assert s.prefetch([(5 * BLOCK_SIZE, 8 * BLOCK_SIZE)]) == 8
            assert wait_for(lambda: env.ebs.in_flight == 8, timeout=30)  # all held by the server at once
            env.ebs.hold.set()
            s.seek(5 * BLOCK_SIZE)
            s.read(8 * BLOCK_SIZE)
            assert s.stats()["blocks_fetched"] == 8
    finally:
        env.ebs.hold.set()
    assert sorted(env.ebs.gets) == list(range(5, 13))


def test_a_failed_prefetch_fails_the_read_that_needs_the_block(
    env: MotoEnv, aws: tuple[MotoEnv, str]
) -> None:
    """Denied: the read of a prefetched block raises what a read's own fetch raises, without a
    second request, and the first failure is kept for the run's end."""
    env.ebs.deny = "get"
    with stream(aws) as plain, pytest.raises(OSError) as read_error:
        plain.seek(6 * BLOCK_SIZE)
        plain.read(10)
    expected = str(read_error.value).replace("block 6", "block 5")
    env.ebs.reset()
    env.ebs.deny = "get"
    with stream(aws, readahead=0) as s:
        assert s.prefetch([(5 * BLOCK_SIZE, 1)]) == 1
        assert wait_for(lambda: s.failure is not None, timeout=30)
        assert s.stats()["prefetch_unread"] == 1
        s.seek(5 * BLOCK_SIZE)
        with pytest.raises(OSError) as prefetched_error:
            s.read(10)
        assert str(prefetched_error.value) == expected
        assert isinstance(prefetched_error.value.__cause__, AwsError)
        assert env.ebs.gets == [5]  # asked once, by the prefetch
        with pytest.raises(AwsError, match="AccessDeniedException"):
            s.raise_if_failed()
        assert s.stats()["prefetch_unread"] == 0
        s.seek(5 * BLOCK_SIZE)
        with pytest.raises(OSError, match="AccessDeniedException"):
            s.read(10)  # consumed: a later read asks again, as after any failed read
    assert env.ebs.gets == [5, 5]


def test_a_prefetch_never_read_still_ends_the_run_with_its_failure(
    env: MotoEnv, aws: tuple[MotoEnv, str]
) -> None:
    env.ebs.corrupt = 100
    s = stream(aws)
    assert s.prefetch([(7 * BLOCK_SIZE, 1)]) == 1
    s.close()  # waits for the pool
    assert isinstance(s.failure, AwsError) and "ChecksumMismatch" in str(s.failure)
    assert s.failure.exit_code == ExitCode.INCONCLUSIVE
    assert s.prefetch([(8 * BLOCK_SIZE, 1)]) == 0  # closed: nothing is asked for


def test_prefetch_is_bounded_and_never_evicts_what_it_fetched(
    env: MotoEnv, aws: tuple[MotoEnv, str], image: Path
) -> None:
    """A cache of 4 blocks holds at most 3 prefetched blocks not read yet; reads of other blocks
    evict around them, and what does not fit is dropped, not fetched."""
    data = image.read_bytes()
    with stream(aws, cache_bytes=4 * BLOCK_SIZE, readahead=0) as s:
        assert s.prefetch_limit == 3
        assert s.prefetch([(5 * BLOCK_SIZE, 5 * BLOCK_SIZE)]) == 3  # 5, 6, 7; 8 and 9 dropped
        assert s.stats()["prefetch_dropped"] == 2
        for index in (0, 1, 2, 10, 11, 12, 100):  # more than the cache holds
            s.seek(index * BLOCK_SIZE)
            s.read(10)
        hits = s.stats()["cache_hits"]
        for index in (5, 6):
            s.seek(index * BLOCK_SIZE + 7)
            assert s.read(100) == data[index * BLOCK_SIZE + 7 : index * BLOCK_SIZE + 107]
        assert s.stats()["cache_hits"] == hits + 2  # still cached: never evicted
        assert s.prefetch([(7 * BLOCK_SIZE, 3 * BLOCK_SIZE)]) == 2  # 7 is held still; room for 8, 9
        assert s.stats()["prefetch_unread"] == 3
        stats = s.stats()
    assert env.ebs.gets.count(5) == env.ebs.gets.count(6) == env.ebs.gets.count(7) == 1
    assert stats["prefetch_blocks"] == 5 and stats["prefetch_dropped"] == 2


def test_prefetches_take_turns_and_a_read_goes_first(env: MotoEnv, aws: tuple[MotoEnv, str]) -> None:
    """At most ``concurrency`` prefetched blocks are in the pool at a time; a read of one still
    waiting for a worker is fetched at once, before the prefetches queued ahead of it."""
    env.ebs.hold = threading.Event()
    try:
        with stream(aws, concurrency=2, readahead=0) as s:
            assert s.prefetch([(5 * BLOCK_SIZE, 6 * BLOCK_SIZE)]) == 6  # 5..10
            assert wait_for(lambda: env.ebs.in_flight == 2, timeout=30)
            assert not s.fetched([(5 * BLOCK_SIZE, 1)])
            reader = threading.Thread(target=lambda: (s.seek(10 * BLOCK_SIZE), s.read(10)))
            reader.start()
            assert wait_for(lambda: s.stats()["prefetch_unread"] == 5, timeout=30)  # 10 is the read's
            env.ebs.hold.set()
            reader.join(timeout=60)
            for index in range(5, 10):
                s.seek(index * BLOCK_SIZE)
                s.read(10)
            assert s.fetched([(5 * BLOCK_SIZE, 5 * BLOCK_SIZE), (3 * BLOCK_SIZE, 10)])  # 3: never written
            assert not s.fetched([(100 * BLOCK_SIZE, 1)])
            stats = s.stats()
    finally:
        env.ebs.hold.set()
    assert sorted(env.ebs.gets[:2]) == [5, 6]
    assert env.ebs.gets.index(10) < env.ebs.gets.index(9)  # the read went before the queued 7, 8, 9
    assert sorted(env.ebs.gets) == list(range(5, 11))
    assert env.ebs.max_in_flight <= 3  # 2 workers (the front may count one reply late)
    assert stats["prefetch_blocks"] == 6 and stats["readahead_blocks"] == 0


# Last in the module: its own MotoEnv resets moto's process-global backends (the module's snapshot
# is gone after it).
@pytest.mark.slow
def test_a_real_disk_image_reads_back_byte_for_byte(
    faulty_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPT + ext4 image of the faulty Debian tree, uploaded as real uploads do (zero blocks skipped):
    the whole stream hashes like the file, and only written blocks were fetched."""
    import hashlib

    with MotoEnv() as moto:
        snapshot_id, written = upload_image(moto.client("ebs", direct=True), faulty_disk)
        for key, value in moto.env.items():
            monkeypatch.setenv(key, value)
        with stream((moto, snapshot_id)) as s:
            digest, left = hashlib.sha256(), faulty_disk.stat().st_size
            while left:
                chunk = s.read(min(left, 4 * BLOCK_SIZE))
                digest.update(chunk)
                left -= len(chunk)
            assert s.read() == bytes(s.size - faulty_disk.stat().st_size)  # the volume is whole GiB
            stats = s.stats()
    assert digest.hexdigest() == hashlib.sha256(faulty_disk.read_bytes()).hexdigest()
    assert stats["blocks_listed"] == stats["blocks_fetched"] == written == len(set(moto.ebs.gets))
    assert stats["zero_block_reads"] > 0
