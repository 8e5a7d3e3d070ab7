"""Files kept between runs under ``$XDG_CACHE_HOME/imagelint``: where, written atomically, bounded.

The one helper of imagelint's caches (the audits of :mod:`imagelint.diff.cache`, the EBS blocks of
:mod:`imagelint.aws.block_store`):

- :func:`cache_root`: ``$XDG_CACHE_HOME/imagelint/<name>`` (``~/.cache/imagelint/<name>`` without
  it); None when the cache is off: ``IMAGELINT_NO_CACHE`` set to a comma-separated list of cache
  names turns those off (``audits,blocks``), set to anything else but empty or ``0`` every cache.
- :func:`locked`: an exclusive ``flock`` on the directory's ``.lock`` (the directory made, mode 0700).
- :func:`write_atomic`: a temporary file in the same directory, written (flushed to disk when asked)
  and renamed into place: a reader never sees half a file. Call it with the lock held.
- :func:`prune`: the least recently used files (by mtime: a hit touches its file) out, down to a
  number of files and a total of bytes. Call it with the lock held.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

DISABLE = "IMAGELINT_NO_CACHE"
CACHES = frozenset({"audits", "blocks", "packs"})  # every cache_root name


def cache_root(name: str) -> Path | None:
    """Where the cache ``name`` lives; None when it is turned off."""
    if off(name):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "imagelint" / name


def off(name: str) -> bool:
    """Whether ``IMAGELINT_NO_CACHE`` turns the cache ``name`` off (see the module's docstring)."""
    value = os.environ.get(DISABLE, "").strip()
    if value in ("", "0"):
        return False
    names = {n.strip() for n in value.split(",")}
    return name in names or not names <= CACHES


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """An exclusive lock on ``directory`` (made if missing) for the block's duration."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    with (directory / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def write_atomic(path: Path, data: bytes, *, sync: bool = True) -> None:
    """``data`` at ``path``, all of it or nothing (``sync``: flushed to disk before the rename)."""
    fd, temporary = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def prune(directory: Path, pattern: str, *, max_files: int, max_bytes: int) -> int:
    """Remove the least recently used ``pattern`` files past the bounds; the bytes left."""
    entries = []
    for path in directory.glob(pattern):
        with contextlib.suppress(OSError):
            stat = path.stat()
            entries.append((stat.st_mtime, stat.st_size, path))
    entries.sort(reverse=True)  # newest first
    kept = total = 0
    for _, size, path in entries:
        if kept + 1 > max_files or total + size > max_bytes:
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        kept, total = kept + 1, total + size
    return total
