"""Loaded rule packs kept between runs (imagelint/rulepacks/cache.py): the same pack for the same bytes,
path and code, rebuilt from JSON data; a miss for anything else: a file that is not ours, an entry
renamed to another pack's identity, one cut short; and a planted pickle is never run."""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

import pytest

from imagelint.errors import RulePackError
from imagelint.rulepacks import cache
from imagelint.rulepacks.loader import load_pack
from tests.rulepacks.test_loader import GOOD_RULE
from tests.support import is_root, need


@pytest.fixture
def kept_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("IMAGELINT_NO_CACHE", raising=False)
    return tmp_path / "cache" / "imagelint" / "packs"


def _pack(tmp_path: Path, text: str = GOOD_RULE) -> Path:
    path = tmp_path / "pack.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_loaded_pack_is_kept_for_its_exact_bytes_path_and_flag(tmp_path: Path, kept_in: Path) -> None:
    path = _pack(tmp_path)
    data = path.read_bytes()
    assert cache.recall(path, data, builtin=False) is None
    loaded = load_pack(path)
    assert cache.recall(path, data, builtin=False) is not None
    assert len(list(kept_in.glob("*.json"))) == 1
    assert load_pack(path) == loaded  # rebuilt from what was kept: the same rules, sources included
    assert cache.recall(path, data, builtin=True) is None
    assert cache.recall(tmp_path / "elsewhere.yaml", data, builtin=False) is None
    assert cache.recall(path, data + b"\n", builtin=False) is None


def test_a_refused_pack_is_never_kept(tmp_path: Path, kept_in: Path) -> None:
    path = _pack(tmp_path, GOOD_RULE.replace("severity: low", "severity: loud"))
    for _ in range(2):  # refused again the second time: nothing was kept
        with pytest.raises(RulePackError, match="loud"):
            load_pack(path)
    assert not list(kept_in.glob("*.json"))


def test_a_change_to_imagelint_code_is_a_miss(
    tmp_path: Path, kept_in: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _pack(tmp_path)
    load_pack(path)
    assert cache.recall(path, path.read_bytes(), builtin=False) is not None
    monkeypatch.setattr(cache, "code_signature", lambda: b"another build")
    assert cache.recall(path, path.read_bytes(), builtin=False) is None


def test_the_signature_follows_every_module_of_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy of the package with one module touched signs differently (size and mtime)."""
    package = tmp_path / "imagelint"
    (package / "checks").mkdir(parents=True)
    module = package / "checks" / "kind.py"
    module.write_text("X = 1\n")
    monkeypatch.setattr(cache, "_PACKAGE", package)
    signatures = []
    for stamp in (1_000_000_000, 2_000_000_000):
        os.utime(module, ns=(stamp, stamp))
        cache.code_signature.cache_clear()
        signatures.append(cache.code_signature())
    cache.code_signature.cache_clear()
    assert signatures[0] != signatures[1]


@pytest.mark.parametrize("spoil", ["group-writable", "truncated", "another pack", "symlink"])
def test_a_kept_file_that_cannot_be_trusted_is_a_miss(tmp_path: Path, kept_in: Path, spoil: str) -> None:
    path = _pack(tmp_path)
    load_pack(path)
    (kept,) = kept_in.glob("*.json")
    if spoil == "group-writable":
        kept.chmod(0o664)
    elif spoil == "truncated":
        kept.write_bytes(kept.read_bytes()[:40])
    elif spoil == "symlink":
        (tmp_path / "genuine").write_bytes(kept.read_bytes())
        kept.unlink()
        kept.symlink_to(tmp_path / "genuine")
    else:
        other = tmp_path / "other"
        other.mkdir()
        load_pack(_pack(other))
        (newer,) = set(kept_in.glob("*.json")) - {kept}
        kept.write_bytes(newer.read_bytes())  # a genuine entry, of the pack of another path
    assert cache.recall(path, path.read_bytes(), builtin=False) is None
    assert load_pack(path).rules[0].id == "X100"  # and the YAML is read instead


def test_an_older_pack_renamed_to_a_newer_identity_is_a_miss(tmp_path: Path, kept_in: Path) -> None:
    """The issue's attack: the entry of an older pack under the newer pack's name would bring back a
    rule the newer one changed (and name a SHA-256 that is not the file's)."""
    path = _pack(tmp_path)
    load_pack(path)
    (older,) = kept_in.glob("*.json")
    older_bytes = older.read_bytes()
    path.write_text(GOOD_RULE.replace("severity: low", "severity: high"), encoding="utf-8")
    load_pack(path)
    (newer,) = set(kept_in.glob("*.json")) - {older}
    newer.write_bytes(older_bytes)
    newer.chmod(0o600)
    reloaded = load_pack(path)
    assert reloaded.rules[0].severity == "high"
    assert reloaded.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_planted_pickle_is_never_run(tmp_path: Path, kept_in: Path) -> None:
    """Whatever sits under a pack's entry name, even a pickle that would run code, is read as bytes."""
    path = _pack(tmp_path)
    marker = tmp_path / "ran"
    planted = pickle.dumps(_RunsCode(str(marker)))
    load_pack(path)
    (entry,) = kept_in.glob("*.json")
    entry.write_bytes(planted)
    entry.chmod(0o600)
    assert load_pack(path).rules[0].id == "X100"
    assert not marker.exists()


class _RunsCode:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (open, (self.marker, "w"))


def test_off_with_imagelint_no_cache(tmp_path: Path, kept_in: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _pack(tmp_path)
    for value in ("1", "packs", "audits,packs"):
        monkeypatch.setenv("IMAGELINT_NO_CACHE", value)
        load_pack(path)
        assert not kept_in.exists(), value
    monkeypatch.setenv("IMAGELINT_NO_CACHE", "audits,blocks")
    load_pack(path)
    assert len(list(kept_in.glob("*.json"))) == 1


def test_the_planted_cache_of_another_user_runs_nothing_and_changes_no_verdict(tmp_path: Path) -> None:
    """The issue's attack, through the real CLI: another local user creates ``imagelint/packs`` first
    in a shared XDG_CACHE_HOME and links each built-in pack's entry to a file the victim owns whose
    first bytes are a pickle. The audit ignores the cache (one note), runs nothing, and still fails."""
    from imagelint.rulepacks.loader import builtin_pack_paths
    from tests.support import os_root, run_cli

    shared = tmp_path / "shared-cache"
    packs = shared / "imagelint" / "packs"
    packs.mkdir(parents=True)
    marker = tmp_path / "ran"
    victim_file = tmp_path / "downloaded.img"
    victim_file.write_bytes(pickle.dumps(_RunsCode(str(marker))) + b"\0" * 512)
    for pack in builtin_pack_paths():
        name = hashlib.sha256(cache.identity(pack, pack.read_bytes(), builtin=True)).hexdigest()
        (packs / f"{name}.json").symlink_to(victim_file)
    need(is_root(), "chown to another user needs root")
    for directory in (shared / "imagelint", packs):
        os.chown(directory, 65534, 65534)
        directory.chmod(0o777)
    root = os_root(tmp_path / "image", {"/etc/machine-id": "0123456789abcdef0123456789abcdef\n"})
    proc = run_cli(
        "audit", str(root), "--select", "IL102", env={"XDG_CACHE_HOME": str(shared), "IMAGELINT_NO_CACHE": ""}
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert not marker.exists()
    notes = [line for line in proc.stderr.splitlines() if "cache off" in line]
    assert len(notes) == 1 and "packs cache off" in notes[0] and "owned by uid 65534" in notes[0], proc.stderr


def test_fifos_under_every_cache_name_block_nothing(tmp_path: Path) -> None:
    """A FIFO under each pack's entry name (and where the old lock file was) cost no CPU while it
    blocked every command forever; now the audit reads the YAML and ends."""
    from imagelint.rulepacks.loader import builtin_pack_paths
    from tests.support import os_root, run_cli

    packs = tmp_path / "cache" / "imagelint" / "packs"
    packs.mkdir(parents=True, mode=0o700)
    (tmp_path / "cache" / "imagelint").chmod(0o700)
    os.mkfifo(packs / ".lock")
    for pack in builtin_pack_paths():
        name = hashlib.sha256(cache.identity(pack, pack.read_bytes(), builtin=True)).hexdigest()
        os.mkfifo(packs / f"{name}.json", 0o600)
    root = os_root(tmp_path / "image", {"/etc/machine-id": "0123456789abcdef0123456789abcdef\n"})
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "IMAGELINT_NO_CACHE": ""}
    proc = run_cli("audit", str(root), "--select", "IL102", env=env, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert len(list(packs.glob("*.json"))) == len(builtin_pack_paths())  # kept anew, as regular files
    assert all(p.is_file() for p in packs.glob("*.json"))


def test_a_kept_pack_keeps_the_order_of_its_mappings(kept_in: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Examples are trees written in order (the docs print them so): the kept pack's are in YAML order."""
    import json

    from imagelint.rulepacks.loader import builtin_pack_paths

    def shapes() -> list[str]:
        return [
            json.dumps([r.example, r.negative_example, r.check.params])
            for path in builtin_pack_paths()
            for r in load_pack(path, builtin=True).rules
        ]

    monkeypatch.setenv("IMAGELINT_NO_CACHE", "1")
    fresh = shapes()
    monkeypatch.delenv("IMAGELINT_NO_CACHE")
    shapes()  # kept
    assert shapes() == fresh
