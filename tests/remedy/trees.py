"""A whole tree as data (paths, kinds, link targets, contents, modes), to compare two trees exactly."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path


def listing(root: Path) -> dict[str, tuple[str, str]]:
    """image path -> (kind, link target / content digest / ""), for every entry below ``root``."""
    out: dict[str, tuple[str, str]] = {}
    for directory, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(directory, name)
            st = path.lstat()
            rel = "/" + str(path.relative_to(root))
            mode = oct(stat.S_IMODE(st.st_mode))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", mode)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", f"{mode} {hashlib.sha256(path.read_bytes()).hexdigest()}")
            else:
                out[rel] = ("special", f"{mode} {st.st_rdev}")
    return out


def differences(a: dict[str, tuple[str, str]], b: dict[str, tuple[str, str]]) -> list[str]:
    return [f"{k}: {a.get(k)} != {b.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
