"""`imagelint watch`: set up the outputs (refusing bad usage before anything runs), then loop until stopped.

Start-up errors are one line and exit 2: no output asked for, ``--npd`` mixed with the others, an
address that cannot be bound, a textfile directory that cannot be written, ``prometheus-client``
missing. Everything the host may lack at run time (memory cgroups, systemd, the journal) is a source
that is down, reported on stderr and as ``imagelint_source_up 0``; the watch keeps running.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from imagelint import stderr
from imagelint.errors import ImageLintError, UsageError, extra_hint
from imagelint.records import dataclass
from imagelint.session import RunOptions, prepare
from imagelint.soak.runner import stop_on_signals
from imagelint.watch.loop import Watcher, WatchSettings
from imagelint.watch.state import WatchState


@dataclass(frozen=True)
class Outputs:
    listen: str | None = None
    textfile: str | None = None


def warn(line: str) -> None:
    stderr.warning(line)


def _need_client() -> None:
    try:
        import prometheus_client  # noqa: F401  (the run needs it anyway: import it now, fail early)
    except ImportError:
        raise UsageError(
            f"--listen and --textfile need prometheus-client: {extra_hint('watch')}", where="watch"
        ) from None


def run_watch(
    settings: WatchSettings, outputs: Outputs, options: RunOptions | None, *, duration: float | None = None
) -> None:
    """Watch until SIGINT/SIGTERM (or ``duration`` seconds); ``options`` None: no rules judged."""
    from imagelint.watch import metrics, textfile

    if outputs.listen is None and outputs.textfile is None:
        raise UsageError("give an output: --listen ADDR:PORT, --textfile DIR or --npd CHECK", where="watch")
    _need_client()
    if outputs.textfile is not None:
        textfile.check_directory(outputs.textfile)
    rules = prepare(options) if options is not None else None
    watcher = Watcher(settings, rules=rules, warn=warn)
    server: Any = None
    if outputs.listen is not None:
        from imagelint.watch.serve import parse_listen, serve

        parse_listen(outputs.listen)
        server = serve(outputs.listen, metrics.registry(lambda: watcher.state, process=True))
    file_registry = metrics.registry(lambda: watcher.state, process=False)
    stop = threading.Event()
    deadline = None if duration is None else time.monotonic() + duration

    last_write = -math.inf

    def write_textfile() -> None:
        if outputs.textfile is None:
            return
        try:
            textfile.write_atomically(outputs.textfile, metrics.exposition(file_registry))
        except OSError as exc:
            warn(f"watch: --textfile {outputs.textfile}: {exc.strerror or exc}")
        except ImageLintError as exc:  # the file became a link, a FIFO, another user's...
            warn(f"watch: --textfile {exc}")

    def publish(state: WatchState) -> None:
        nonlocal last_write
        now = time.monotonic()
        if now - last_write >= settings.interval:  # not every pass: the loop ticks at the CPU read rate
            last_write = now
            write_textfile()
        if deadline is not None and time.monotonic() >= deadline:
            stop.set()

    timer = threading.Timer(duration or 0.0, stop.set)
    timer.daemon = True
    if duration is not None:
        timer.start()
    try:
        with stop_on_signals(stop):
            watcher.run(stop, publish)
        write_textfile()  # the last state, as the watch ends
    finally:
        stop.set()
        timer.cancel()
        if server is not None:
            server.shutdown()
            server.server_close()
