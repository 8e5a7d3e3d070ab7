"""Hostile cache entries for the three cache readers, and the property every one must satisfy.

Shared by the property tests (``tests/test_cachefiles_fuzz.py``) and the long run
(``benchmarks/fuzz_caches.py``). Every case is a function of a seeded ``random.Random``.

A case puts one entry where a reader looks, in one of three ways:

* ``planted``: bytes written straight into the cache directory, as anyone who can fill it would
  (random bytes, a genuine entry's bytes mutated: bit flips, cuts, insertions, another entry's
  bytes, the format's magic with a guessed tag), with a mode, a link or a FIFO;
* ``authenticated``: a payload written through :class:`imagelint.cachefiles.CacheDir` with the
  user's own key, as a bug or an older imagelint of the same user might have (random JSON, a
  genuine payload with values swapped for hostile ones, cut JSON);
* ``genuine``: the entry the reader itself wrote, untouched.

``check_case(case, directory)`` writes the case and reads it the way a run does (a rule pack
loaded, an audit looked up for a diff, an EBS block and a listing looked up). The property: the
reader never raises and never blocks; a planted entry is always a miss (the source is read: the
pack equals the one its YAML gives, the audit and block lookups answer None); an authenticated one
is a miss or an answer (the user's own key vouches for it; what matters is that nothing raises);
a genuine one is a hit. It returns the outcome ("hit" or
"miss") and raises :class:`CacheProblem` otherwise.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagelint import cachefiles
from imagelint.cachefiles import CacheDir
from tests.support import REPO, alarm_after

CASE_SECONDS = 10
READERS = ("pack", "audit", "block", "listing")
WAYS = ("planted", "authenticated", "genuine")
PACK = REPO / "rules" / "aws.yaml"
REGION, SNAPSHOT = "us-east-1", "snap-0123456789abcdef0"
HOSTILE = [
    None, True, 0, -1, 2**64, 1e308, "", "\n", "::error::x", "\u202e", "a" * 5000,
    [], {}, [[[[]]]], {"rules": None}, {"raw": {}}, {"id": 1}, "IL101", "high", "../../etc/passwd",
]  # fmt: skip


class CacheProblem(Exception):
    """A broken promise of a cache reader; ``signature`` groups equal problems."""

    def __init__(self, signature: str, detail: str) -> None:
        super().__init__(f"{signature}: {detail}")
        self.signature = signature


@dataclass(frozen=True)
class Case:
    reader: str
    way: str
    seed: int


def make_case(rng: random.Random) -> Case:
    return Case(rng.choice(READERS), rng.choice(WAYS), rng.getrandbits(64))


def _deadline(seconds: int) -> AbstractContextManager[None]:
    return alarm_after(seconds, lambda: CacheProblem("hang", f"a reader ran past {seconds} s"))


def _hostile_json(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.4:
        return rng.choice(HOSTILE)
    if roll < 0.7:
        return [_hostile_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ["pack", "rules", "raw", "source", "key", "document", "inventory", "findings", "verdict", "id"]
    return {rng.choice(keys): _hostile_json(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def _swap_values(rng: random.Random, value: Any) -> Any:
    """``value`` with some of its leaves swapped for hostile ones (shape kept)."""
    if isinstance(value, dict):
        return {k: _swap_values(rng, v) for k, v in value.items() if rng.random() > 0.05}
    if isinstance(value, list):
        return [_swap_values(rng, v) for v in value if rng.random() > 0.05]
    return rng.choice(HOSTILE) if rng.random() < 0.15 else value


def _mutate(rng: random.Random, raw: bytes, others: list[bytes]) -> bytes:
    """``raw`` changed (never the same bytes: the genuine entry is a case of its own)."""
    changed = _changed(rng, raw, others)
    return changed if changed != raw else raw + b"\0"


def _changed(rng: random.Random, raw: bytes, others: list[bytes]) -> bytes:
    kind = rng.randrange(6)
    if kind == 0 and raw:  # bit flips
        data = bytearray(raw)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    if kind == 1:  # cut
        return raw[: rng.randrange(len(raw) + 1)]
    if kind == 2:  # inserted bytes
        at = rng.randrange(len(raw) + 1)
        return raw[:at] + rng.randbytes(rng.randint(1, 64)) + raw[at:]
    if kind == 3 and others:  # another entry's genuine bytes
        return rng.choice(others)
    if kind == 4:  # the magic with a guessed tag
        payload = json.dumps(_hostile_json(rng)).encode()
        return cachefiles.MAGIC + rng.randbytes(32).hex().encode() + b"\n" + payload
    return rng.randbytes(rng.randint(0, 4096))


class _Readers:
    """The three caches in ``directory``, each entry looked up the way a run looks it up."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        os.environ["XDG_CACHE_HOME"] = str(directory / "cache")
        os.environ.pop("IMAGELINT_NO_CACHE", None)

    def store(self, name: str) -> CacheDir:
        opened = CacheDir.open(name)
        assert opened is not None, "the fuzzer's own cache was refused"
        return opened

    def write_genuine(self, reader: str) -> tuple[str, str]:
        """Have the reader's own writer keep an entry; its cache name and entry name."""
        if reader == "pack":
            from imagelint.rulepacks.loader import load_pack

            load_pack(PACK, builtin=True)
            return "packs", _name_of_pack()
        if reader == "audit":
            from imagelint.diff.cache import AuditCache

            AuditCache().put(self.audit_key, {"inventory": {"units": {}}, "verdict": "fail", "findings": []})
            return "audits", AuditCache.entry(self.audit_key)
        from imagelint.aws.block_store import BlockStore

        store = BlockStore()
        if reader == "block":
            store.put(REGION, SNAPSHOT, 0, b"\x07" * (512 * 1024))
            return "blocks", store.ref_entry(store.key(REGION, SNAPSHOT, 0))
        store.put_listing(REGION, SNAPSHOT, 1 << 30, [0, 5, 9])
        return "blocks", store.listing_entry(f"{REGION}:{SNAPSHOT}")

    audit_key = f"ebs:{REGION}:{SNAPSHOT} run"

    def look_up(self, reader: str) -> Any:
        """What a run gets back: the pack's rules' (id, severity) pairs, the audit, the block, the listing."""
        if reader == "pack":
            from imagelint.rulepacks.loader import load_pack

            pack = load_pack(PACK, builtin=True)
            return [(r.id, r.severity.value, r.source) for r in pack.rules], pack.sha256
        if reader == "audit":
            from imagelint.commands.diff import _kept_report
            from imagelint.diff.cache import AuditCache

            kept = AuditCache().get(self.audit_key)
            return None if kept is None else _kept_report(kept)
        from imagelint.aws.block_store import BlockStore

        if reader == "block":
            return BlockStore().get(REGION, SNAPSHOT, 0)
        return BlockStore().get_listing(REGION, SNAPSHOT)


def _name_of_pack() -> str:
    import hashlib

    from imagelint.rulepacks import cache

    identity = cache.identity(PACK, PACK.read_bytes(), builtin=True)
    return hashlib.sha256(identity).hexdigest() + cache.SUFFIX


def _from_source(readers: _Readers, reader: str) -> Any:
    """What the lookup answers when nothing is kept."""
    if reader != "pack":
        return None
    os.environ["IMAGELINT_NO_CACHE"] = "1"
    try:
        return readers.look_up("pack")
    finally:
        os.environ.pop("IMAGELINT_NO_CACHE")


def _place(rng: random.Random, path: Path, data: bytes) -> None:
    """``data`` under ``path`` as a planter might leave it: a file of any mode, a link, a FIFO."""
    path.unlink(missing_ok=True)
    shape = rng.randrange(8)
    if shape == 0:
        os.mkfifo(path, 0o600)
        return
    if shape == 1:
        target = path.parent.parent / f"elsewhere-{rng.getrandbits(32)}"
        target.write_bytes(data)
        path.symlink_to(target)
        return
    path.write_bytes(data)
    path.chmod(rng.choice([0o600, 0o600, 0o644, 0o666, 0o620]))
    if shape == 2:
        os.link(path, path.parent.parent / f"hardlink-{rng.getrandbits(32)}")


def check_case(case: Case, directory: Path, seconds: int = CASE_SECONDS) -> str:
    """Write ``case`` into a fresh cache under ``directory`` and read it back; "hit" or "miss"."""
    import shutil

    rng = random.Random(case.seed)
    shutil.rmtree(directory / "cache", ignore_errors=True)
    for stray in directory.glob("elsewhere-*"):
        stray.unlink()
    for stray in directory.glob("hardlink-*"):
        stray.unlink()
    readers = _Readers(directory)
    with _deadline(seconds):
        name, entry = readers.write_genuine(case.reader)
        store = readers.store(name)
        genuine = readers.look_up(case.reader)
        path = store.path / entry
        if case.way == "planted":
            others = [p.read_bytes() for p in store.path.iterdir() if p.is_file() and p.name != entry][:4]
            _place(rng, path, _mutate(rng, path.read_bytes(), others))
        elif case.way == "authenticated":
            payload = _authenticated_payload(rng, path, store, case.reader)
            with store.locked():
                store.write(entry, payload, _identity(case.reader))
        store.close()
        try:
            answer = readers.look_up(case.reader)
        except CacheProblem:
            raise
        except Exception as exc:
            raise CacheProblem(f"{case.reader} raised {type(exc).__name__}", repr(exc)[:300]) from exc
        expected = _from_source(readers, case.reader)
    if case.way == "genuine":
        if answer is None or answer != genuine:
            raise CacheProblem(f"{case.reader}: genuine entry missed", entry)
        return "hit"
    if case.way == "planted" and answer != expected:
        raise CacheProblem(f"{case.reader}: planted entry believed", repr(answer)[:300])
    return "miss" if answer == expected else "hit"


def _identity(reader: str) -> bytes:
    if reader == "pack":
        from imagelint.rulepacks import cache

        return cache.identity(PACK, PACK.read_bytes(), builtin=True)
    if reader == "audit":
        return _Readers.audit_key.encode()
    if reader == "block":
        return f"{REGION}:{SNAPSHOT}:0".encode()
    return f"{REGION}:{SNAPSHOT}".encode()


def _authenticated_payload(rng: random.Random, path: Path, store: CacheDir, reader: str) -> bytes:
    genuine = store.read(path.name, _identity(reader), limit=1 << 24)
    assert genuine is not None
    roll = rng.randrange(3)
    if roll == 0:
        return json.dumps(_hostile_json(rng)).encode()
    if roll == 1:
        return genuine[: rng.randrange(len(genuine) + 1)]
    try:
        return json.dumps(_swap_values(rng, json.loads(genuine))).encode()
    except ValueError:  # a reference or a listing: not JSON
        return _mutate(rng, genuine, [])


GENERATORS: dict[str, Callable[[random.Random], Case]] = {
    way: (lambda rng, way=way: Case(rng.choice(READERS), way, rng.getrandbits(64))) for way in WAYS
}
