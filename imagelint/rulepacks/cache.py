"""Loaded rule packs kept between runs, so that a run does not parse and validate the same YAML again.

Loading the built-in packs (parsing the YAML, validating it against the schema the check kinds
compose, building every rule's typed parameters and checking its message template) costs more than
a whole ``imagelint units`` run. A pack that loaded once loads the same way again as long as its
bytes, its path (rules name their source as ``path:line:column``), the built-in flag and imagelint's
code are the same, so the loaded :class:`RulePack` is kept, pickled, in
``$XDG_CACHE_HOME/imagelint/packs/<key>.pickle``, the key a SHA-256 of all of these.

- **Invalidated on any change:** imagelint's code enters the key as the size and modification time
  of every module of the package (as Python's own bytecode cache judges its sources), so an edited
  check kind or loader never meets a pack loaded by the old one.
- **Only successes are kept:** a pack that fails is read, refused and reported every time.
- **Built atomically, bounded:** written to a temporary file and renamed under the cache's lock
  (:mod:`imagelint.cachefiles`), at most ``MAX_FILES`` packs.
- **Trusted only if it is ours:** a kept file is unpickled only when the running user owns it and
  nobody else may write it; anything that does not unpickle to the pack asked for is a miss.
- ``IMAGELINT_NO_CACHE`` turns it off as every cache (``1``, or a list naming ``packs``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import stat
import sys
from functools import cache
from pathlib import Path

from imagelint import __version__, cachefiles
from imagelint.rulepacks.model import RulePack

NAME = "packs"
MAX_FILES = 256
MAX_BYTES = 64 * 1024 * 1024
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


def key(path: Path, pack_bytes: bytes, *, builtin: bool) -> str:
    digest = hashlib.sha256(code_signature())
    digest.update(f"\0{path}\0{builtin}\0".encode("utf-8", "surrogateescape"))
    digest.update(hashlib.sha256(pack_bytes).digest())
    return digest.hexdigest()


def recall(path: Path, pack_bytes: bytes, *, builtin: bool) -> RulePack | None:
    """The pack loaded from these bytes at this path before, or None."""
    directory = cachefiles.cache_root(NAME)
    if directory is None:
        return None
    kept = directory / f"{key(path, pack_bytes, builtin=builtin)}.pickle"
    try:
        with kept.open("rb") as f:
            st = os.fstat(f.fileno())
            if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return None
            pack = pickle.load(f)
    except Exception:  # none kept, cut short, from another Python: load the YAML instead
        return None
    if not isinstance(pack, RulePack) or pack.path != str(path) or pack.builtin != builtin:
        return None
    return pack


def keep(path: Path, pack_bytes: bytes, pack: RulePack) -> None:
    """Keep ``pack``, loaded from ``pack_bytes`` at ``path``, for the next run; silently not, when the
    cache cannot be written."""
    directory = cachefiles.cache_root(NAME)
    if directory is None:
        return
    name = f"{key(path, pack_bytes, builtin=pack.builtin)}.pickle"
    with contextlib.suppress(OSError, pickle.PicklingError, TypeError, AttributeError):
        data = pickle.dumps(pack, protocol=pickle.HIGHEST_PROTOCOL)
        with cachefiles.locked(directory):
            cachefiles.write_atomic(directory / name, data, sync=False)
            cachefiles.prune(directory, "*.pickle", max_files=MAX_FILES, max_bytes=MAX_BYTES)
