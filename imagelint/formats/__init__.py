"""Output formats: one module per format, each a ``Formatter`` rendering the same ``Report``.

``write_file`` is how a rendered report reaches a file: atomically, so a run that fails half way
never leaves an empty or truncated report where the previous one was.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import stat
import tempfile
from pathlib import Path

from imagelint.errors import UsageError
from imagelint.formats.interface import Formatter, RenderOptions

# name → module; imported only when used, so a run pays only for the formats it writes
FORMATS = {
    "text": "imagelint.formats.text",
    "json": "imagelint.formats.json_format",
    "sarif": "imagelint.formats.sarif",
    "junit": "imagelint.formats.junit",
    "github": "imagelint.formats.github",
    "markdown": "imagelint.formats.markdown",
}


def get_formatter(name: str) -> Formatter:
    if name not in FORMATS:
        raise UsageError(f"unknown output format {name!r} (known: {', '.join(FORMATS)})")
    module = importlib.import_module(FORMATS[name])
    return module.FORMATTER  # type: ignore[no-any-return]


def write_file(path: Path, text: str) -> None:
    """Write ``text`` as UTF-8 to ``path`` atomically: a temporary file in the same directory, then
    ``os.replace``. Encoding happens first, so nothing is written when it fails. A symbolic link is
    written through; a path that is not a regular file (``/dev/stdout``, a FIFO) is written in place."""
    data = text.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        existing: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        existing = None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        with open(path, "wb") as stream:
            stream.write(data)
        return
    real = Path(os.path.realpath(path))
    fd, temporary = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, stat.S_IMODE(existing.st_mode) if existing else 0o666 & ~_umask())
        os.replace(temporary, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


__all__ = ["FORMATS", "Formatter", "RenderOptions", "get_formatter", "write_file"]
