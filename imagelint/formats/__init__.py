"""Output formats: one module per format, each a ``Formatter`` rendering the same ``Report``.

``write_file`` is how a rendered report reaches a file: atomically, so a run that fails half way
never leaves an empty or truncated report where the previous one was.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pkgutil
import stat
import tempfile
from pathlib import Path

from imagelint.errors import UsageError
from imagelint.formats.interface import REPORT, Formatter, RenderOptions

# shared helpers, and renderings of one document that several formats share: not formats
_NOT_FORMATS = frozenset(
    {"interface", "outputs", "presentation", "wording", "diff_lines", "units_table", "units_json", "charts"}
)
_ORDER = ("text", "json", "sarif", "junit", "github", "markdown")  # how help lists the first ones


def _discover() -> dict[str, str]:
    """format name → module, found by listing this package (nothing is imported): a module
    ``NAME.py`` (or ``NAME_format.py``, where NAME would shadow a standard module) that defines
    ``FORMATTER`` is the format NAME. A new format is one module here plus its test."""
    found = {
        m.name.removesuffix("_format"): f"{__name__}.{m.name}"
        for m in pkgutil.iter_modules(__path__)
        if m.name not in _NOT_FORMATS and not m.name.startswith("_")
    }
    ordered = [n for n in _ORDER if n in found] + sorted(n for n in found if n not in _ORDER)
    return {name: found[name] for name in ordered}


# name → module; imported only when used, so a run pays only for the formats it writes
FORMATS = _discover()


def get_formatter(name: str) -> Formatter:
    if name not in FORMATS:
        raise UsageError(f"unknown output format {name!r} (known: {', '.join(FORMATS)})")
    module = importlib.import_module(FORMATS[name])
    return module.FORMATTER  # type: ignore[no-any-return]


def check_format(name: str, document: str = REPORT) -> Formatter:
    """The format ``name``, if it renders ``document``; else a UsageError listing those that do."""
    formatter = get_formatter(name)
    if document not in formatter.documents:
        known = ", ".join(n for n in FORMATS if document in get_formatter(n).documents)
        what = {"units": "units listing"}.get(document, document)
        raise UsageError(f"format {name!r} cannot write a {what} (formats that can: {known})")
    return formatter


def render(name: str, document: str, subject: object, options: RenderOptions) -> str:
    """``subject`` (a Report, a diff result, a units listing) rendered by format ``name``."""
    formatter = check_format(name, document)
    if document == REPORT:
        return formatter.render(subject, options)  # type: ignore[arg-type]
    return str(getattr(formatter, f"render_{document}")(subject, options))


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
