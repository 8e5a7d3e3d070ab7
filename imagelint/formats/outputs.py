"""Where rendered documents go: ``-f FORMAT[:PATH]`` parsed and checked, then every output rendered
before any is written (stdout, or a file replaced atomically). Every command writes through here.

A report file is this run's, complete, or absent: :func:`clear_stale` removes what an earlier run
left at every ``-f`` path before this run starts (before its options are even parsed), so a run that
fails, is refused or is killed leaves no report behind that a pipeline could read as its own, and
one that ends writes each file whole (temporary name, rename). Every path is written, and removed,
by :mod:`imagelint.outputfile`: only when it is absent or this user's regular file, never through a
link; anything else is refused before the run (exit 2), and a path that changes during the run ends
it inconclusive (exit 3)."""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import field, replace
from pathlib import Path

from imagelint import outputfile
from imagelint.errors import UsageError
from imagelint.formats import FORMATS, RenderOptions, check_format, render
from imagelint.formats.interface import REPORT
from imagelint.records import dataclass


@dataclass(frozen=True)
class OutputSpec:
    """Where one format goes: a path, or stdout (``None``)."""

    format: str
    path: Path | None = None
    # what was at the path when it was checked (parse): the writer refuses anything else there then
    found: outputfile.Identity | outputfile.Unchecked | None = field(
        default=outputfile.UNCHECKED, compare=False
    )

    @classmethod
    def parse(cls, spec: str, document: str = REPORT) -> OutputSpec:
        """``FORMAT`` or ``FORMAT:PATH`` (``-`` is stdout), for a format that renders ``document``."""
        name, sep, path = spec.partition(":")
        if name not in FORMATS:
            raise UsageError(f"--format {spec!r}: unknown format {name!r} (known: {', '.join(FORMATS)})")
        try:
            check_format(name, document)
        except UsageError as exc:
            raise UsageError(f"--format {spec!r}: {exc.message}") from None
        if sep and not path:
            raise UsageError(f"--format {spec!r}: a path must follow the colon")
        if not path or path == "-":
            return cls(name)
        if not Path(path).parent.is_dir():
            raise UsageError(f"--format {spec!r}: the directory {str(Path(path).parent)!r} does not exist")
        return cls(name, Path(path), outputfile.check(Path(path)))

    @staticmethod
    def parse_all(specs: list[str], document: str = REPORT) -> list[OutputSpec]:
        """Every ``-f`` of a command; at most one goes to stdout (GitHub's workflow commands aside)."""
        outputs = [OutputSpec.parse(spec, document) for spec in specs]
        one_to_stdout(outputs)
        return outputs


def one_to_stdout(outputs: list[OutputSpec]) -> None:
    """Refuse two formats on stdout (GitHub's workflow commands are log lines and may share it), and
    two formats in one file (the second would find the first's file there: changed during the run)."""
    if sum(1 for o in outputs if o.path is None and o.format != "github") > 1:
        raise UsageError("only one --format can go to stdout; give the others a path (FORMAT:PATH)")
    paths = [os.path.abspath(o.path) for o in outputs if o.path is not None]
    if len(set(paths)) < len(paths):
        raise UsageError("two --format outputs name the same file; give each its own path")


def write_outputs(
    subject: object, outputs: list[OutputSpec], options: RenderOptions, document: str = REPORT
) -> None:
    """Render every output first, then write them: a format that fails leaves no output half written,
    and each file is replaced atomically (:func:`imagelint.outputfile.replace`). ``subject`` is the
    ``document`` (a Report, a diff result, a units listing); every command writes through here."""
    rendered: list[tuple[OutputSpec, str]] = []
    for spec in outputs:
        terminal = spec.path is None and sys.stdout.isatty()
        rendered.append((spec, render(spec.format, document, subject, replace(options, terminal=terminal))))
    for spec, text in rendered:
        if spec.path is None:
            sys.stdout.write(text)
            sys.stdout.flush()
            continue
        data = text.encode("utf-8")
        try:
            outputfile.replace(spec.path, data, expected=spec.found)
        except OSError as exc:
            raise UsageError(
                f"cannot write {spec.format} {document}: {exc.strerror}", where=str(spec.path)
            ) from None


def named_paths(argv: list[str]) -> list[Path]:
    """The files a command line's ``-f FORMAT:PATH`` options name, for a known format."""
    values, take = [], False
    for arg in argv:
        if take:
            values.append(arg)
            take = False
        elif arg in ("-f", "--format"):
            take = True
        elif arg.startswith("--format="):
            values.append(arg.removeprefix("--format="))
        elif arg.startswith("-f") and not arg.startswith("--"):
            values.append(arg[2:])
    paths = []
    for value in values:
        name, sep, path = value.partition(":")
        if sep and path and path != "-" and name in FORMATS:
            paths.append(Path(path))
    return paths


def clear_stale(argv: list[str]) -> None:
    """Remove this user's regular file at every ``-f`` path of ``argv`` (never through a link), unless
    another argument names the same file (a report read as an input is never removed). A link, a
    FIFO, a directory or another user's file there is refused (exit 2): the run would not replace it."""
    inputs = set()
    for arg in argv:
        with contextlib.suppress(OSError, ValueError):
            inputs.add(os.path.realpath(arg))
    for path in named_paths(argv):
        try:
            real = os.path.realpath(path)
        except (OSError, ValueError):
            continue
        if real not in inputs or os.path.islink(path):
            outputfile.remove_stale(path)
