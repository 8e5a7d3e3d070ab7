"""One host's failure, remote or local, as the reason on that host's row.

A run over many hosts (``fleet``, ``--hosts``) judges every host and writes its report whatever one
host does: a download S3 refuses (a 500, ``SlowDown``, ``ExpiredToken``, a KMS error), a bundle that
does not decode, a scratch disk that fills up while the bundle is saved, a write error. Each is that
host's inconclusive row, with this reason; the verdict of the run is the worst of its hosts'. A signal
(a ``BaseException``) is not a host's failure: it still stops the run.
"""

from __future__ import annotations

from imagelint.errors import ImageLintError


def reason(exc: Exception) -> str:
    """What went wrong for this host, in one line."""
    if isinstance(exc, ImageLintError):
        return exc.message
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return f"local error while handling this host: {exc.strerror or exc}{where}"
    return f"local error while handling this host: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
