"""Loaded rule packs kept between runs, so that a run does not parse and validate the same YAML again.

Loading the built-in packs (parsing the YAML, validating it against the schema the check kinds
compose) costs more than a whole ``imagelint units`` run. A pack that was validated once is the
same pack again as long as its bytes, its path (rules name their source as ``path:line:column``),
the built-in flag and imagelint's code are the same, so the validated rules are kept, as JSON, in
``$XDG_CACHE_HOME/imagelint/packs/<identity>.json``. A hit skips the YAML parser and the schema;
each rule is still built by the loader's own code (typed parameters, template check), so a kept
entry holds data only and can never run code.

- **The full identity:** imagelint's version and code (the size and modification time of every
  module of the package, as Python's own bytecode cache judges its sources), the pack's path and
  built-in flag, and the SHA-256 of its bytes: the entry's name is a digest of it, the entry's HMAC
  covers it (:mod:`imagelint.cachefiles`), and the entry repeats the bytes' SHA-256 the report will
  name. An entry renamed to another pack, or written by another user or machine, is a miss.
- **Only successes are kept:** a pack that fails is read, refused and reported every time.
- **Trusted only if it is ours, built atomically, bounded:** :mod:`imagelint.cachefiles` (at most
  :data:`MAX_FILES` packs).
- ``IMAGELINT_NO_CACHE`` turns it off as every cache (``1``, or a list naming ``packs``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from functools import cache
from pathlib import Path
from typing import Any

from imagelint import __version__
from imagelint.cachefiles import CacheDir

NAME = "packs"
SUFFIX = ".json"
FORMAT = 1
MAX_FILES = 256
MAX_BYTES = 64 * 1024 * 1024
MAX_ENTRY_BYTES = 4 * 1024 * 1024
_PACKAGE = Path(__file__).resolve().parent.parent


@cache
def code_signature() -> bytes:
    """Size and modification time of every module of the imagelint package, as one digest."""
    digest = hashlib.sha256(f"{__version__}\0{sys.version}".encode())
    stack = [str(_PACKAGE)]
    while stack:
        directory = stack.pop()
        with os.scandir(directory) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                    stack.append(entry.path)
                elif entry.name.endswith(".py"):
                    st = entry.stat()
                    digest.update(f"{entry.path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.digest()


def identity(path: Path, pack_bytes: bytes, *, builtin: bool) -> bytes:
    """Everything a loaded pack depends on, as bytes."""
    return b"\0".join(
        (
            f"format {FORMAT}".encode(),
            code_signature(),
            str(path).encode("utf-8", "surrogateescape"),
            b"builtin" if builtin else b"user",
            hashlib.sha256(pack_bytes).hexdigest().encode(),
        )
    )


def _entry(pack_identity: bytes) -> str:
    return hashlib.sha256(pack_identity).hexdigest() + SUFFIX


def recall(path: Path, pack_bytes: bytes, *, builtin: bool) -> dict[str, Any] | None:
    """What :func:`keep` kept for these bytes at this path (the pack's header and its validated
    rules with their sources), or None."""
    directory = CacheDir.open(NAME)
    if directory is None:
        return None
    pack_identity = identity(path, pack_bytes, builtin=builtin)
    with directory:
        payload = directory.read(_entry(pack_identity), pack_identity, limit=MAX_ENTRY_BYTES)
    if payload is None:
        return None
    try:
        kept = json.loads(payload)
    except ValueError:
        return None
    if (
        not isinstance(kept, dict)
        or not isinstance(kept.get("pack"), dict)
        or kept["pack"].get("sha256") != hashlib.sha256(pack_bytes).hexdigest()
        or not isinstance(kept.get("rules"), list)
    ):
        return None
    return kept


def keep(
    path: Path, pack_bytes: bytes, *, builtin: bool, pack: dict[str, Any], rules: list[dict[str, Any]]
) -> None:
    """Keep a validated pack for the next run; silently not, when it is not plain JSON data or the
    cache cannot be written."""
    try:
        data = json.dumps({"pack": pack, "rules": rules}, allow_nan=False).encode()  # in YAML order
        if json.loads(data) != {"pack": pack, "rules": rules}:  # YAML held something JSON cannot
            return
    except (TypeError, ValueError):
        return
    if len(data) > MAX_ENTRY_BYTES:
        return
    directory = CacheDir.open(NAME)
    if directory is None:
        return
    pack_identity = identity(path, pack_bytes, builtin=builtin)
    with directory, contextlib.suppress(OSError), directory.locked():
        directory.write(_entry(pack_identity), data, pack_identity)
        directory.prune(SUFFIX, max_files=MAX_FILES, max_bytes=MAX_BYTES)
