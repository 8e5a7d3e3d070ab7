"""Whether a file is a collector bundle, from its first bytes: asked of every file an opener is
given, so it imports nothing of the bundle reader."""

from __future__ import annotations

from pathlib import Path


def is_bundle(path: Path) -> bool:
    """A file whose content is a bundle (a gzip stream, or a tar archive: ``ustar`` at byte 257).
    Any other file given where an image root is expected is a disk image; a directory is a tree."""
    if not path.is_file():
        return False
    try:
        with path.open("rb") as f:
            head = f.read(512)
    except OSError:
        return False
    return head[:2] == b"\x1f\x8b" or head[257:262] == b"ustar"
