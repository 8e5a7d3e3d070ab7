"""The on-disk EBS block store (imagelint.aws.block_store): a block is served back only under its own
region, snapshot and index, with its checksum verified; a corrupt entry is a miss; the same data under
a second name is a reference, not a second copy; written behind, in one go; bounded; off with
IMAGELINT_NO_CACHE; a directory that cannot be written turns it off with a warning."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from imagelint import cachefiles
from imagelint.aws import block_store
from imagelint.aws.block_store import BlockStore, StoredBlocks
from imagelint.aws.ebs_api import BLOCK_SIZE
from imagelint.cachefiles import CacheDir

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
    ("suffix", "damage"),
    [
        (".blk", lambda raw: raw[:-1] + bytes([raw[-1] ^ 1])),  # one bit of the data
        (".blk", lambda raw: raw[: len(raw) // 2]),  # torn: a crash before the data was on disk
        (".blk", lambda raw: b""),
        (".ref", lambda raw: raw[:-3] + b"000"),  # names other data
        (".ref", lambda raw: raw[:-1]),  # cut short
        (".ref", lambda raw: b""),
    ],
)
def test_a_corrupt_entry_is_a_miss_and_removed(tmp_path: Path, suffix: str, damage: object) -> None:
    store = BlockStore(tmp_path)
    store.put("us-east-1", A, 0, block(7))
    (entry,) = tmp_path.glob("*" + suffix)
    entry.write_bytes(damage(entry.read_bytes()))  # type: ignore[operator]
    assert store.get("us-east-1", A, 0) is None and not entry.exists()
    assert not list(tmp_path.glob("*.ref"))  # the reference goes with it: the next read is a plain miss


def test_a_missing_data_file_is_a_miss(tmp_path: Path) -> None:
    store = BlockStore(tmp_path)
    store.put("us-east-1", A, 0, block(7))
    (data,) = tmp_path.glob("*.blk")
    data.unlink()  # pruned, say
    assert store.get("us-east-1", A, 0) is None and not list(tmp_path.glob("*.ref"))


def test_the_same_data_under_a_second_name_is_a_reference_not_a_copy(tmp_path: Path) -> None:
    """NEW's unchanged block is OLD's data: keeping it under NEW's name writes a reference only,
    and each name is served, and verified, on its own."""
    store = BlockStore(tmp_path)
    store.put("r", A, 5, block(3))
    found = store.get_verified("r", A, 5)
    assert found is not None
    store.put("r", B, 5, found[0], found[1])  # the digest the store verified, not hashed again
    store.put("r", B, 6, block(3))  # the same content at another index: the same data file
    assert len(list(tmp_path.glob("*.blk"))) == 1 and len(list(tmp_path.glob("*.ref"))) == 3
    assert store.get("r", A, 5) == store.get("r", B, 5) == store.get("r", B, 6) == block(3)
    (data,) = tmp_path.glob("*.blk")
    data.write_bytes(data.read_bytes()[:-1] + b"\0")  # the shared data damaged: a miss under every name
    assert store.get("r", B, 5) is None and store.get("r", A, 5) is None


def test_blocks_are_held_until_the_read_is_over_and_written_in_one_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = BlockStore(tmp_path)
    stored = StoredBlocks(store, "r", A, pending_bytes=2 * BLOCK_SIZE)
    takes: list[int] = []
    real = CacheDir.locked

    def counted(self: CacheDir) -> object:
        takes.append(1)
        return real(self)

    monkeypatch.setattr(CacheDir, "locked", counted)
    stored.put(0, block(1))
    stored.put(1, block(2))
    assert stored.get(1) == block(2) and not list(tmp_path.glob("*.ref"))  # held: served, not written
    assert store.get("r", A, 1) is None
    stored.flush()
    assert takes == [1] and store.get("r", A, 0) == block(1) and store.get("r", A, 1) == block(2)
    for i in range(2, 5):  # past the bound: the thread that puts writes what is held
        stored.put(i, block(i))
    assert store.get("r", A, 2) == block(2) and stored.get(4) == block(4)
    stored.flush()
    assert store.get("r", A, 4) == block(4)


def test_the_least_recently_used_blocks_go_past_the_bound(tmp_path: Path) -> None:
    store = BlockStore(tmp_path, max_bytes=3 * (BLOCK_SIZE + 200))
    for i in range(3):
        store.put("r", A, i, block(i))
        found = store.get_verified("r", A, i)
        assert found is not None
        for name in (store.ref_entry(store.key("r", A, i)), store.data_entry(found[1])):
            os.utime(tmp_path / name, (1000 + i, 1000 + i))  # written in this order
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


def test_a_directory_that_cannot_be_made_turns_it_off_with_one_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes: list[str] = []
    monkeypatch.setattr(cachefiles, "_noted", set())
    monkeypatch.setattr(cachefiles, "_notify", notes.append)
    (tmp_path / "file").write_text("not a directory")
    for _ in range(2):
        store = BlockStore(tmp_path / "file" / "blocks")
        store.put("r", A, 0, block(1))
        assert store.directory is None and store.get("r", A, 0) is None
    assert len(notes) == 1 and notes[0].startswith("blocks cache off"), notes


def test_a_reference_moved_to_another_blocks_name_is_a_miss(tmp_path: Path) -> None:
    """B's genuine reference copied under A's name would serve B's data as A's block."""
    store = BlockStore(tmp_path)
    store.put("r", A, 0, block(1))
    store.put("r", B, 0, block(2))
    a_ref, b_ref = (tmp_path / store.ref_entry(store.key("r", s, 0)) for s in (A, B))
    a_ref.write_bytes(b_ref.read_bytes())
    assert store.get("r", A, 0) is None and store.get("r", B, 0) == block(2)


def test_a_listing_moved_to_another_snapshot_is_a_miss(tmp_path: Path) -> None:
    store = BlockStore(tmp_path)
    store.put_listing("r", A, 8 * BLOCK_SIZE, [0, 1])
    store.put_listing("r", B, 8 * BLOCK_SIZE, [0, 1, 2, 3])
    assert store.get_listing("r", A) == (8 * BLOCK_SIZE, frozenset({0, 1}))
    a_list, b_list = (tmp_path / store.listing_entry(f"r:{s}") for s in (A, B))
    a_list.write_bytes(b_list.read_bytes())
    assert store.get_listing("r", A) is None


def test_writes_past_the_pruning_step_prune(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(block_store, "PRUNE_EVERY", 2 * BLOCK_SIZE)
    store = BlockStore(tmp_path, max_bytes=BLOCK_SIZE + 200)
    for i in range(4):
        store.put("r", A, i, block(i))
    assert len(list(tmp_path.glob("*.blk"))) <= 2
