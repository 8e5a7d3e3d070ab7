"""Where rendered documents go: ``-f FORMAT[:PATH]`` parsed and checked, then every output rendered
before any is written (stdout, or a file replaced atomically). Every command writes through here."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from imagelint.errors import UsageError
from imagelint.formats import FORMATS, RenderOptions, check_format, render, write_file
from imagelint.formats.interface import REPORT


@dataclass(frozen=True)
class OutputSpec:
    """Where one format goes: a path, or stdout (``None``)."""

    format: str
    path: Path | None = None

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
        return cls(name, Path(path) if path and path != "-" else None)

    @staticmethod
    def parse_all(specs: list[str], document: str = REPORT) -> list[OutputSpec]:
        """Every ``-f`` of a command; at most one goes to stdout (GitHub's workflow commands aside)."""
        outputs = [OutputSpec.parse(spec, document) for spec in specs]
        one_to_stdout(outputs)
        return outputs


def one_to_stdout(outputs: list[OutputSpec]) -> None:
    """Refuse two formats on stdout; GitHub's workflow commands are log lines and may share it."""
    if sum(1 for o in outputs if o.path is None and o.format != "github") > 1:
        raise UsageError("only one --format can go to stdout; give the others a path (FORMAT:PATH)")


def write_outputs(
    subject: object, outputs: list[OutputSpec], options: RenderOptions, document: str = REPORT
) -> None:
    """Render every output first, then write them: a format that fails leaves no output half written,
    and each file is replaced atomically (``imagelint.formats.write_file``). ``subject`` is the
    ``document`` (a Report, a diff result, a units listing); every command writes through here."""
    rendered: list[tuple[OutputSpec, str]] = []
    for spec in outputs:
        color = spec.path is None and sys.stdout.isatty() and "NO_COLOR" not in os.environ
        rendered.append((spec, render(spec.format, document, subject, replace(options, color=color))))
    for spec, text in rendered:
        if spec.path is None:
            sys.stdout.write(text)
            sys.stdout.flush()
            continue
        try:
            write_file(spec.path, text)
        except OSError as exc:
            raise UsageError(
                f"cannot write {spec.format} {document}: {exc.strerror}", where=str(spec.path)
            ) from None
