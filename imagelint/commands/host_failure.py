"""One host's failure, remote or local, as the reason on that host's row.

A run over many hosts (``fleet``, ``--hosts``) judges every host and writes its report whatever one
host does: a download S3 refuses (a 500, ``SlowDown``, ``ExpiredToken``, a KMS error), a bundle that
does not decode, a scratch disk that fills up while the bundle is saved, a write error. Each is that
host's inconclusive row, with this reason; the verdict of the run is the worst of its hosts'. A signal
(a ``BaseException``) is not a host's failure: it still stops the run.

Each host's bundle is saved in a scratch directory of its own, made by the worker that saves it (so
that even failing to make it is that host's failure, not the run's) and removed once the bundle is
judged, or at once when saving it failed (:func:`saved_apart`, :func:`judged_then_removed`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TypeVar

from imagelint.errors import ImageLintError

T = TypeVar("T")


def saved_apart(prefix: str, save: Callable[[Path], Path]) -> Path:
    """What ``save(directory)`` saved into a new scratch directory of this host's own (under
    ``$TMPDIR``); the directory is removed when ``save`` fails."""
    own = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        return save(own)
    except BaseException:
        shutil.rmtree(own, ignore_errors=True)
        raise


def judged_then_removed(saved: Future[Path], judge: Callable[[Path], T]) -> T:
    """``judge`` of the bundle :func:`saved_apart` saved; its scratch directory is removed after."""
    path = saved.result()
    try:
        return judge(path)
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)


def reason(exc: Exception) -> str:
    """What went wrong for this host, in one line."""
    if isinstance(exc, ImageLintError):
        return exc.message
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return f"local error while handling this host: {exc.strerror or exc}{where}"
    return f"local error while handling this host: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
