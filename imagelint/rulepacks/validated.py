"""Remember which rule packs already passed schema validation, so a run need not import jsonschema.

Validating every pack against the composed schema costs ~0.3 s per run (most of it importing
jsonschema). A pack that passed once passes again as long as its bytes, the schema (which the check
kinds shape) and imagelint's version are the same, so the run keeps one empty marker file per such
combination in the user's cache (``$XDG_CACHE_HOME/imagelint/validated``). Only successes are
remembered; a pack that fails is validated, and refused, every time. Without a writable cache
everything is validated as before.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path

from imagelint import __version__


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "imagelint" / "validated"


def _schema_digest() -> str:
    from imagelint.checks import registry

    return _digest(tuple(sorted(registry())))


@cache
def _digest(kinds: tuple[str, ...]) -> str:
    from imagelint.rulepacks.schema import rules_schema

    return hashlib.sha256(json.dumps(rules_schema(), sort_keys=True).encode()).hexdigest()


def marker(pack_bytes: bytes) -> str:
    digest = hashlib.sha256()
    for part in (__version__.encode(), _schema_digest().encode(), pack_bytes):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


def already_valid(pack_bytes: bytes) -> bool:
    if os.environ.get("IMAGELINT_NO_VALIDATION_CACHE"):
        return False
    return (_cache_dir() / marker(pack_bytes)).is_file()


def remember_valid(pack_bytes: bytes) -> None:
    if os.environ.get("IMAGELINT_NO_VALIDATION_CACHE"):
        return
    try:
        directory = _cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        (directory / marker(pack_bytes)).touch()
    except OSError:
        pass  # no writable cache: validate every time
