"""Command-line entry point.

``--version`` is answered before anything heavy is imported, so that start-up stays close to a bare
interpreter. The cyclic garbage collector is then told to run less often (:func:`collect_less_often`).
Every other command runs in a child process under OS limits (:mod:`imagelint.cli.box`) and through
:func:`dispatch`, the one catch-all: an error imagelint did not foresee is one line ("internal error …
please report it") and exit 3, never a traceback and never exit 1, the code that means "findings".
``--debug`` (or ``IMAGELINT_DEBUG=1``) prints the traceback as well.
"""

from __future__ import annotations

import os
import sys

DEBUG_FLAG = "--debug"
GC_YOUNG_THRESHOLD = 50_000  # allocations between young-generation collections; CPython's default is 700


def main() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):
        from imagelint import __version__

        print(f"imagelint {__version__}")
        return
    collect_less_often()
    from imagelint import limits
    from imagelint.cli.box import run_boxed

    try:
        name = _command_name()
        run_limits = limits.from_environment(daemon=name == "watch", machine=name == "vm")
    except Exception as exc:  # a bad IMAGELINT_*_LIMIT value: a usage error, before any fork
        from imagelint import stderr

        stderr.error(str(exc))
        sys.exit(2)
    sys.exit(run_boxed(dispatch, run_limits))


def collect_less_often() -> None:
    """Run the cyclic collector every ``GC_YOUNG_THRESHOLD`` allocations instead of every 700.

    A run builds objects that live to its end (modules, rule packs, parsed units) and drops little
    cyclic garbage (reference counting frees the rest at once). At the default threshold an audit of
    a cloud image makes some 70 young collections, about 9 ms of its 250 spent re-examining objects
    that survive; at this one, none. At most that many allocations of cyclic garbage wait to be freed,
    and the run's memory limit bounds them like everything else. mypy tunes its collector the same way.
    """
    import gc  # not at the top: ``--version`` imports nothing the interpreter has not

    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def _command_name() -> str:
    """The first word of the command line that is not an option."""
    return next((a for a in sys.argv[1:] if not a.startswith("-")), "")


def debugging() -> bool:
    return DEBUG_FLAG in sys.argv[1:] or os.environ.get("IMAGELINT_DEBUG", "") not in ("", "0")


def dispatch() -> int:
    """Run the typer application; its exit code. Nothing escapes as a traceback."""
    if DEBUG_FLAG in sys.argv[1:]:
        sys.argv.remove(DEBUG_FLAG)
        os.environ["IMAGELINT_DEBUG"] = "1"
    try:
        from imagelint import cachefiles, stderr

        cachefiles.set_notifier(stderr.warning)  # a cache refused: one line, and the run goes on without it
        from imagelint.cli.app import run

        run()
    except SystemExit as exc:
        return _code_of(exc)
    except KeyboardInterrupt:
        _say("interrupted; inconclusive")
        return 3
    except BaseException as exc:
        _say(describe_unexpected(exc))
        if debugging():
            import traceback  # only here: importing it costs ``--version`` a third of its start

            traceback.print_exc()
        return 3
    return 0


def _code_of(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    _say(str(exc.code))
    return 1


def _say(message: str) -> None:
    from imagelint import stderr

    stderr.error(message)


def describe_unexpected(exc: BaseException) -> str:
    """One line for an exception nothing else handled: what, where in imagelint, and what to do."""
    from imagelint import limits
    from imagelint.errors import where_raised

    subject = limits.current_subject()
    where = f"{subject}: " if subject else ""
    if isinstance(exc, MemoryError):
        return limits.met(limits.from_environment().describe_memory())
    if isinstance(exc, RecursionError):
        return f"{where}nested too deeply to read (Python's recursion limit); inconclusive"
    if isinstance(exc, OSError) and exc.strerror:
        name = exc.filename if exc.filename is not None else subject
        named = f"{os.fsdecode(name)}: " if name else where
        return f"{named}{exc.strerror} ({type(exc).__name__} at {where_raised(exc)}); inconclusive"
    return (
        f"{where}internal error: {type(exc).__name__} at {where_raised(exc)}: {exc}; inconclusive. "
        "Please report it with the traceback --debug prints"
    )
