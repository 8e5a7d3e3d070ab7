"""Loaded rule packs kept between runs (imagelint/rulepacks/cache.py): the same pack for the same bytes,
path and code; a miss for anything else, for a file that is not ours and for one that does not unpickle."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from imagelint.errors import RulePackError
from imagelint.rulepacks import cache
from imagelint.rulepacks.loader import load_pack
from tests.rulepacks.test_loader import GOOD_RULE


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
    assert cache.recall(path, data, builtin=False) == loaded
    assert len(list(kept_in.glob("*.pickle"))) == 1
    assert cache.recall(path, data, builtin=True) is None
    assert cache.recall(tmp_path / "elsewhere.yaml", data, builtin=False) is None
    assert cache.recall(path, data + b"\n", builtin=False) is None


def test_a_refused_pack_is_never_kept(tmp_path: Path, kept_in: Path) -> None:
    path = _pack(tmp_path, GOOD_RULE.replace("severity: low", "severity: loud"))
    for _ in range(2):  # refused again the second time: nothing was kept
        with pytest.raises(RulePackError, match="loud"):
            load_pack(path)
    assert not list(kept_in.glob("*.pickle"))


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


@pytest.mark.parametrize("spoil", ["group-writable", "truncated", "another pack"])
def test_a_kept_file_that_cannot_be_trusted_is_a_miss(tmp_path: Path, kept_in: Path, spoil: str) -> None:
    path = _pack(tmp_path)
    load_pack(path)
    (kept,) = kept_in.glob("*.pickle")
    if spoil == "group-writable":
        kept.chmod(0o664)
    elif spoil == "truncated":
        kept.write_bytes(kept.read_bytes()[:40])
    else:
        other = tmp_path / "other"
        other.mkdir()
        load_pack(_pack(other))
        (newer,) = set(kept_in.glob("*.pickle")) - {kept}
        kept.write_bytes(newer.read_bytes())  # unpickles, but to the pack of another path
    assert cache.recall(path, path.read_bytes(), builtin=False) is None
    assert load_pack(path).rules[0].id == "X100"  # and the YAML is read instead


def test_off_with_imagelint_no_cache(tmp_path: Path, kept_in: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _pack(tmp_path)
    for value in ("1", "packs", "audits,packs"):
        monkeypatch.setenv("IMAGELINT_NO_CACHE", value)
        load_pack(path)
        assert not kept_in.exists(), value
    monkeypatch.setenv("IMAGELINT_NO_CACHE", "audits,blocks")
    load_pack(path)
    assert len(list(kept_in.glob("*.pickle"))) == 1
