"""The on-disk EBS block store (imagelint.aws.block_store): a block is served back only under its own
region, snapshot and index, with its checksum verified; a corrupt entry is a miss; bounded; off with
IMAGELINT_NO_CACHE; a directory that cannot be written turns it off with a warning."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from imagelint.aws import block_store
from imagelint.aws.block_store import BlockStore
from imagelint.aws.ebs_api import BLOCK_SIZE

A, B = "snap-0aaaaaaaaaaaaaaaa", "snap-0bbbbbbbbbbbbbbbb"


def block(fill: int) -> bytes:
    return bytes([fill]) * BLOCK_SIZE


def test_a_block_is_served_only_under_its_own_region_snapshot_and_index(tmp_path: Path) -> None:
    store = BlockStore(tmp_path)
    store.put("us-east-1", A, 3, block(1))
    assert store.get("us-east-1", A, 3) == block(1)
    assert store.get("us-east-1", B, 3) is None  # an unrelated snapshot's block is never served
    assert store.get("eu-west-1", A, 3) is None
    assert store.get("us-east-1", A, 4) is None
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []  # renamed into place


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[:-1] + bytes([raw[-1] ^ 1]),  # one bit of the data
        lambda raw: raw[: len(raw) // 2],  # torn: a crash before the data was on disk
        lambda raw: raw.replace(A.encode(), B.encode()),  # names another snapshot
        lambda raw: b"",
    ],
)
def test_a_corrupt_entry_is_a_miss_and_removed(tmp_path: Path, damage: object) -> None:
    store = BlockStore(tmp_path)
    store.put("us-east-1", A, 0, block(7))
    (entry,) = tmp_path.glob("*.blk")
    entry.write_bytes(damage(entry.read_bytes()))  # type: ignore[operator]
    assert store.get("us-east-1", A, 0) is None and not entry.exists()


def test_the_least_recently_used_blocks_go_past_the_bound(tmp_path: Path) -> None:
    store = BlockStore(tmp_path, max_bytes=3 * (BLOCK_SIZE + 200))
    for i in range(3):
        store.put("r", A, i, block(i))
        path = store._path(store.key("r", A, i))
        assert path is not None
        os.utime(path, (1000 + i, 1000 + i))  # written in this order
    assert store.get("r", A, 0) is not None  # a hit makes block 0 the most recently used
    store.put("r", A, 3, block(3))
    store.prune()
    assert len(list(tmp_path.glob("*.blk"))) == 3
    assert store.get("r", A, 0) is not None and store.get("r", A, 3) is not None
    assert store.get("r", A, 1) is None  # the least recently used went first


def test_no_cache_turns_it_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("IMAGELINT_NO_CACHE", "1")
    store = BlockStore()
    store.put("r", A, 0, block(1))
    assert store.directory is None and store.get("r", A, 0) is None and not list(tmp_path.iterdir())
    monkeypatch.setenv("IMAGELINT_NO_CACHE", "0")
    assert BlockStore().directory == tmp_path / "imagelint" / "blocks"


def test_a_directory_that_cannot_be_written_turns_it_off_with_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("not a directory")
    store = BlockStore(tmp_path / "file" / "blocks")
    store.put("r", A, 0, block(1))
    store.put("r", A, 1, block(1))
    assert store.directory is None
    assert capsys.readouterr().err.count("block store") == 1


def test_writes_past_the_pruning_step_prune(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(block_store, "PRUNE_EVERY", 2 * BLOCK_SIZE)
    store = BlockStore(tmp_path, max_bytes=BLOCK_SIZE + 200)
    for i in range(4):
        store.put("r", A, i, block(i))
    assert len(list(tmp_path.glob("*.blk"))) <= 2
