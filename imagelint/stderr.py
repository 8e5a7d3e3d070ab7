"""The one way imagelint writes a message line to standard error.

Messages carry strings from the image (paths, unit names, fstab mount points, a remote console), and
stderr is a CI log like any other: a newline in a message must not start a second line, and no line
may start a workflow command (``::error::``). Every line goes through the log channel's escaper
(:func:`imagelint.report.escape.for_log`), whole, so it is one line whatever it quotes.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from imagelint.report.escape import for_log

PROGRAM = "imagelint"


def line(text: str) -> None:
    """Write ``text`` as exactly one escaped line."""
    try:
        sys.stderr.write(for_log(text) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # stderr closed: nothing else can be said


def error(message: str) -> None:
    line(f"{PROGRAM}: error: {message}")


def warning(message: str) -> None:
    line(f"{PROGRAM}: warning: {message}")


@contextlib.contextmanager
def busy(label: str, *, interactive: bool) -> Iterator[None]:
    """On a terminal, a transient line while the block runs: a spinner, ``label`` (escaped) and the
    time elapsed, erased when the block ends. Nothing when stderr is not a terminal (a CI log)."""
    if not interactive:
        yield
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        progress.add_task(for_log(label), total=None)
        yield
