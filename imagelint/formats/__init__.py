"""Output formats: one module per format, each a ``Formatter`` rendering the same ``Report``.

A rendered document reaches a file through :mod:`imagelint.formats.outputs` (and
:mod:`imagelint.outputfile`): whole, or not at all, and never through a link.
"""

from __future__ import annotations

import importlib
import pkgutil

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


__all__ = ["FORMATS", "Formatter", "RenderOptions", "get_formatter"]
