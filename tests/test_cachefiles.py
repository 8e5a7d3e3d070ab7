"""The caches' one trust rule (imagelint/cachefiles.py): which caches IMAGELINT_NO_CACHE turns off, and
every way an entry or a directory that is not this user's own is refused: a link, a hard link, a FIFO,
a foreign owner, a directory others may write, a renamed, cut or edited entry, and a cache restored
from a tarball another key wrote. Each is a miss (or the cache off, with one note), never a hang,
never an error."""

from __future__ import annotations

import os
import signal
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagelint import cachefiles
from imagelint.cachefiles import CacheDir
from tests.support import is_root, need

NOBODY = 65534


def _give_to_nobody(path: Path) -> None:
    need(is_root(), "chown to another user needs root")
    os.chown(path, NOBODY, NOBODY)


@pytest.mark.parametrize(
    ("value", "off"),
    [
        ("", set()),
        ("0", set()),
        ("1", {"audits", "blocks", "packs"}),
        ("yes", {"audits", "blocks", "packs"}),
        ("audits,blocks", {"audits", "blocks"}),
        (" packs ", {"packs"}),
        ("packs,typo", {"audits", "blocks", "packs"}),  # a name it does not know: every cache, to be safe
    ],
)
def test_imagelint_no_cache_names_the_caches_it_turns_off(
    monkeypatch: pytest.MonkeyPatch, value: str, off: set[str]
) -> None:
    monkeypatch.setenv("IMAGELINT_NO_CACHE", value)
    assert {name for name in cachefiles.CACHES if cachefiles.off(name)} == off
    assert {name for name in cachefiles.CACHES if cachefiles.cache_root(name) is None} == off


@pytest.fixture
def notes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[str]]:
    """The notes the caches give, each key file under this test's own state directory."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("IMAGELINT_NO_CACHE", raising=False)
    monkeypatch.setattr(cachefiles, "_keys", {})
    monkeypatch.setattr(cachefiles, "_noted", set())
    said: list[str] = []
    cachefiles.set_notifier(said.append)
    yield said
    cachefiles.set_notifier(None)


@pytest.fixture
def store(notes: list[str], tmp_path: Path) -> Iterator[CacheDir]:
    opened = CacheDir.open("audits")
    assert opened is not None and opened.path == tmp_path / "cache" / "imagelint" / "audits"
    yield opened
    opened.close()


def _written(
    store: CacheDir, entry: str = "e.json", payload: bytes = b'{"x": 1}', identity: bytes = b"id"
) -> Path:
    with store.locked():
        store.write(entry, payload, identity)
    return store.path / entry


@pytest.fixture
def no_hang() -> Iterator[None]:
    """A read that blocks fails the test after 5 s instead of hanging the suite."""

    def hung(signum: int, frame: object) -> None:
        raise TimeoutError("the cache blocked")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(5)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_an_entry_is_read_back_only_under_its_name_and_identity(store: CacheDir) -> None:
    _written(store)
    assert store.read("e.json", b"id", limit=100) == b'{"x": 1}'
    assert store.read("e.json", b"another", limit=100) is None  # and removed: a miss from now on
    assert store.read("e.json", b"id", limit=100) is None
    assert not [p for p in store.path.iterdir() if p.name.startswith(".tmp-")]  # renamed into place


def test_a_renamed_entry_is_a_miss(store: CacheDir) -> None:
    """An older entry renamed to a newer one's name (say, an older pack's under a newer key)."""
    old = _written(store, "old.json", b"old")
    old.rename(store.path / "new.json")
    assert store.read("new.json", b"id", limit=100) is None


@pytest.mark.parametrize(
    "spoil",
    [
        lambda raw: raw[:-1],  # cut short
        lambda raw: raw[: len(cachefiles.MAGIC) + 10],
        lambda raw: b"",
        lambda raw: raw[:-1] + b"2",  # one byte of the payload edited
        lambda raw: raw.replace(cachefiles.MAGIC, b"imagelint-cache 2\n"),
        lambda raw: raw[: cachefiles._TAG - 1] + b" " + raw[cachefiles._TAG :],  # found by the fuzzer
    ],
    ids=["truncated", "torn", "empty", "edited", "other-format", "separator"],
)
def test_a_truncated_or_edited_entry_is_a_miss(store: CacheDir, spoil: object) -> None:
    entry = _written(store)
    entry.write_bytes(spoil(entry.read_bytes()))  # type: ignore[operator]
    assert store.read("e.json", b"id", limit=100) is None and not entry.exists()


def test_an_entry_planted_without_the_key_is_a_miss(store: CacheDir) -> None:
    """Someone who knows the format but not this user's key (a pull request filling actions/cache)."""
    import hashlib
    import hmac

    payload = b'{"x": "planted"}'
    guessed = hmac.new(b"\0" * 32, payload, hashlib.sha256).hexdigest().encode()
    (store.path / "e.json").write_bytes(cachefiles.MAGIC + guessed + b"\n" + payload)
    (store.path / "e.json").chmod(0o600)
    assert store.read("e.json", b"id", limit=100) is None


def test_a_symlinked_entry_is_a_miss_and_never_followed(store: CacheDir, tmp_path: Path) -> None:
    """The planted link of the issue: each entry's name linked to a file of the user's own."""
    victim = tmp_path / "disk.img"
    victim.write_bytes(_written(store).read_bytes())  # even a genuine entry behind a link
    (store.path / "e.json").unlink()
    (store.path / "e.json").symlink_to(victim)
    assert store.read("e.json", b"id", limit=100) is None
    assert victim.exists()  # not followed for the removal either
    assert not os.path.lexists(store.path / "e.json")  # the link itself is gone


def test_a_hard_linked_entry_is_a_miss(store: CacheDir, tmp_path: Path) -> None:
    entry = _written(store)
    os.link(entry, tmp_path / "elsewhere")
    assert store.read("e.json", b"id", limit=100) is None


def test_a_fifo_under_an_entry_name_is_a_miss_without_blocking(store: CacheDir, no_hang: None) -> None:
    os.mkfifo(store.path / "e.json", 0o600)
    assert store.read("e.json", b"id", limit=100) is None
    assert store.read("e.json", limit=100, authenticated=False) is None
    os.mkfifo(store.path / "x.json", 0o600)
    with store.locked():
        assert store.prune(".json", max_files=10, max_bytes=10**6) == 0  # not opened; removed
    assert not (store.path / "x.json").exists()


def test_an_entry_of_another_owner_or_writable_by_others_is_a_miss(store: CacheDir) -> None:
    entry = _written(store)
    _give_to_nobody(entry)
    assert store.read("e.json", b"id", limit=100) is None
    entry = _written(store)
    entry.chmod(0o620)
    assert store.read("e.json", b"id", limit=100) is None


def test_an_entry_past_its_limit_is_a_miss(store: CacheDir) -> None:
    _written(store, payload=b"x" * 200)
    assert store.read("e.json", b"id", limit=199) is None


@pytest.mark.parametrize("spoil", ["foreign owner", "group-writable", "world-writable", "symlink", "a file"])
def test_a_directory_not_ours_alone_turns_the_cache_off_with_one_note(
    notes: list[str], tmp_path: Path, spoil: str
) -> None:
    """Another local user who creates ``imagelint/`` first in a shared XDG_CACHE_HOME."""
    shared = tmp_path / "cache" / "imagelint"
    if spoil == "symlink":
        (tmp_path / "theirs").mkdir()
        shared.parent.mkdir()
        shared.symlink_to(tmp_path / "theirs")
    elif spoil == "a file":
        shared.parent.mkdir()
        shared.write_text("")
    else:
        shared.mkdir(parents=True)
        if spoil == "foreign owner":
            _give_to_nobody(shared)
        else:
            shared.chmod(0o770 if spoil == "group-writable" else 0o777)
    for _ in range(2):
        assert CacheDir.open("packs") is None
    assert len(notes) == 1 and "packs cache off" in notes[0], notes
    assert not (tmp_path / "theirs" / "packs").exists()


def test_a_cache_directory_made_here_is_private(store: CacheDir, tmp_path: Path) -> None:
    for directory in (tmp_path / "cache" / "imagelint", store.path, tmp_path / "state" / "imagelint"):
        assert directory.stat().st_mode & 0o777 == 0o700, directory
    key = tmp_path / "state" / "imagelint" / cachefiles.KEY_FILE
    assert key.stat().st_mode & 0o777 == 0o600 and key.stat().st_size == cachefiles.KEY_BYTES


def test_a_cache_restored_from_a_tarball_is_a_miss(store: CacheDir, notes: list[str], tmp_path: Path) -> None:
    """actions/cache or a tarball restores the cache directory on another machine (or after the key
    changed): owner and modes come back intact, and still nothing in it is believed."""
    _written(store)
    with tarfile.open(tmp_path / "cache.tar", "w") as tar:
        tar.add(tmp_path / "cache", arcname="cache")
    for path in sorted((tmp_path / "cache").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    (tmp_path / "state" / "imagelint" / cachefiles.KEY_FILE).unlink()  # a new machine: a new key
    cachefiles._keys.clear()
    with tarfile.open(tmp_path / "cache.tar") as tar:
        # Python before 3.11.4 (Debian 12's 3.11.2) has no extraction filters
        tar.extractall(tmp_path, **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
    restored = CacheDir.open("audits")
    assert restored is not None and (restored.path / "e.json").exists()
    assert restored.read("e.json", b"id", limit=100) is None


def test_the_same_key_on_another_machine_is_another_key(
    store: CacheDir, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _written(store)
    machine_id = tmp_path / "machine-id"
    machine_id.write_text("0123456789abcdef0123456789abcdef\n")
    monkeypatch.setattr(cachefiles, "MACHINE_ID", str(machine_id))
    cachefiles._keys.clear()
    other = CacheDir.open("audits")
    assert other is not None and other.read("e.json", b"id", limit=100) is None


@pytest.mark.parametrize("spoil", ["symlink", "group-readable", "foreign owner", "short", "hard link"])
def test_a_key_file_that_is_not_ours_alone_turns_every_cache_off(
    notes: list[str], tmp_path: Path, spoil: str
) -> None:
    state = tmp_path / "state" / "imagelint"
    state.mkdir(parents=True, mode=0o700)
    key = state / cachefiles.KEY_FILE
    if spoil == "symlink":
        (tmp_path / "known").write_bytes(b"k" * cachefiles.KEY_BYTES)
        key.symlink_to(tmp_path / "known")
    else:
        key.write_bytes(b"k" * (cachefiles.KEY_BYTES - (spoil == "short")))
        key.chmod(0o640 if spoil == "group-readable" else 0o600)
        if spoil == "foreign owner":
            _give_to_nobody(key)
        if spoil == "hard link":
            os.link(key, tmp_path / "known")
    assert CacheDir.open("audits") is None and CacheDir.open("packs") is None
    assert len(notes) == 1 and notes[0].startswith("caches off:"), notes


def test_concurrent_first_runs_agree_on_one_key(notes: list[str], tmp_path: Path) -> None:
    keys: list[bytes | None] = []

    def first() -> None:
        keys.append(cachefiles._read_or_make_key(tmp_path / "state"))

    threads = [threading.Thread(target=first) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(keys) == 8 and len(set(keys)) == 1
    assert [p.name for p in (tmp_path / "state" / "imagelint").iterdir()] == [cachefiles.KEY_FILE]


def test_pruning_keeps_the_most_recently_used(store: CacheDir) -> None:
    for i in range(4):
        entry = _written(store, f"{i}.json")
        os.utime(entry, (1000 + i, 1000 + i))
    assert store.read("0.json", b"id", limit=100) is not None  # a hit: now the most recent
    with store.locked():
        store.prune(".json", max_files=2, max_bytes=10**6)
    assert store.names(".json") == ["0.json", "3.json"]


def test_no_code_bearing_format_is_read_anywhere() -> None:
    """No module of imagelint loads pickle, shelve or marshal: a cache entry can only ever be data.
    (The regex worker's pipe is the one marshal channel: its own child process, no file.)"""
    from tests.support import REPO

    for module in (REPO / "imagelint").rglob("*.py"):
        text = module.read_text(encoding="utf-8")
        words = ["import pickle", "from pickle", "import shelve", "import dill", "import cloudpickle"]
        if module.name != "textmatch.py":
            words.append("import marshal")
        for word in words:
            assert word not in text, f"{module}: {word}"


@pytest.mark.parametrize(
    "home",
    [None, "", "relative/home"],
    ids=["HOME unset", "HOME empty", "HOME relative"],
)
def test_no_home_and_no_passwd_entry_turns_every_cache_off_with_one_note(
    notes: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, home: str | None
) -> None:
    """A container's arbitrary uid: no passwd entry (the lookup Path.home falls back to fails), and no
    HOME or one that is not absolute (it would be the untrusted working directory's). Every cache is
    a miss, said once; nothing is made in the working directory."""
    import pwd

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.delenv("XDG_STATE_HOME")
    if home is None:
        monkeypatch.delenv("HOME", raising=False)
    else:
        monkeypatch.setenv("HOME", home)
    monkeypatch.chdir(tmp_path)
    for name in sorted(cachefiles.CACHES):
        assert cachefiles.cache_root(name) is None
        assert CacheDir.open(name) is None
    assert CacheDir.at("audits", tmp_path / "given") is None  # no key to sign its entries with
    assert cachefiles.user_key() is None
    assert len(notes) == 1 and notes[0].startswith("caches off: no usable home directory for uid"), notes
    assert list(tmp_path.iterdir()) == []


def test_an_absolute_xdg_cache_home_stands_for_a_missing_home(
    notes: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import pwd

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    monkeypatch.delenv("HOME", raising=False)
    with CacheDir.open("audits") as store:
        assert store is not None and store.path == tmp_path / "cache" / "imagelint" / "audits"
    assert notes == []
