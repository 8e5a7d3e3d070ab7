"""The audit cache (imagelint.diff.cache): kept and read back by key, atomic, bounded, where XDG says,
and off with IMAGELINT_NO_CACHE; what cannot be read is a miss, never an answer."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from imagelint.diff import cache as cache_module
from imagelint.diff.cache import AuditCache, cache_dir


def test_a_document_is_read_back_by_its_key_only(tmp_path: Path) -> None:
    cache = AuditCache(tmp_path)
    cache.put("ebs:us-east-1:snap-1 run", {"inventory": {"units": {}}})
    assert cache.get("ebs:us-east-1:snap-1 run") == {"inventory": {"units": {}}}
    assert cache.get("ebs:us-east-1:snap-2 run") is None
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []  # renamed into place


def test_an_entry_that_names_another_key_or_is_not_json_is_a_miss_and_removed(tmp_path: Path) -> None:
    cache = AuditCache(tmp_path)
    cache.put("a", {"x": 1})
    (entry,) = tmp_path.glob("*.json")
    entry.write_text(json.dumps({"key": "b", "document": {"x": 2}}))
    assert cache.get("a") is None and not entry.exists()
    cache.put("a", {"x": 1})
    entry.write_bytes(b"{not json")
    assert cache.get("a") is None and not entry.exists()


def test_the_oldest_entries_go_past_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "MAX_ENTRIES", 3)
    cache = AuditCache(tmp_path)
    for i in range(5):
        cache.put(f"k{i}", {"i": i})
        for j in range(i + 1):  # older puts are older files
            path = tmp_path / cache.entry(f"k{j}")
            if path.exists():
                os.utime(path, (1000 + j, 1000 + j))
    assert [cache.get(f"k{i}") for i in range(5)] == [None, None, {"i": 2}, {"i": 3}, {"i": 4}]


def test_concurrent_writers_leave_one_whole_entry(tmp_path: Path) -> None:
    cache = AuditCache(tmp_path)
    big = ["x" * 1000] * 200
    threads = [threading.Thread(target=cache.put, args=("k", {"n": n, "pad": big})) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = cache.get("k")
    assert kept is not None and kept["n"] in range(8) and kept["pad"] == big
    assert len(list(tmp_path.glob("*.json"))) == 1


def test_where_and_whether(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("IMAGELINT_NO_CACHE", raising=False)
    assert cache_dir() == tmp_path / "imagelint" / "audits"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "imagelint" / "audits"
    monkeypatch.setenv("IMAGELINT_NO_CACHE", "0")
    assert cache_dir() is not None
    monkeypatch.setenv("IMAGELINT_NO_CACHE", "1")
    assert cache_dir() is None
    off = AuditCache()
    off.put("k", {"x": 1})
    assert off.get("k") is None and not (tmp_path / "home" / ".cache").exists()


def test_entries_planted_with_the_right_names_are_misses(tmp_path: Path) -> None:
    """The issue's attack: two JSON entries planted under the names ``diff`` would look up made
    ``imagelint diff ebs:snap-A ebs:snap-B`` pass with no AWS reachable. Without this user's key
    they are misses, and the snapshots are read."""
    cache = AuditCache(tmp_path)
    for key in ("ebs:us-east-1:snap-A run", "ebs:us-east-1:snap-B run"):
        planted = tmp_path / cache.entry(key)
        planted.write_text(json.dumps({"key": key, "document": {"verdict": "pass", "inventory": {}}}))
        planted.chmod(0o600)
        assert cache.get(key) is None
    cache.put("ebs:us-east-1:snap-A run", {"verdict": "fail"})
    assert cache.get("ebs:us-east-1:snap-A run") == {"verdict": "fail"}
