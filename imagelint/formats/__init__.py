"""Output formats: one module per format, each a ``Formatter`` rendering the same ``Report``.

A rendered document reaches a file through :mod:`imagelint.formats.outputs` (and
:mod:`imagelint.outputfile`): whole, or not at all, and never through a link.
"""

from __future__ import annotations

import importlib

from imagelint.errors import UsageError
from imagelint.formats.interface import REPORT, Formatter, RenderOptions

# The formats, by name, in the order help lists them: the one list of them (a module is imported only
# when its format is used, so a run pays only for the formats it writes). A new format is its module
# defining ``FORMATTER``, a line here and its test; tests/test_registries.py fails on a module of this
# package that is neither a format here nor one of HELPERS.
FORMATS: dict[str, str] = {
    "text": f"{__name__}.text",
    "json": f"{__name__}.json_format",  # json would shadow the standard module
    "sarif": f"{__name__}.sarif",
    "junit": f"{__name__}.junit",
    "github": f"{__name__}.github",
    "markdown": f"{__name__}.markdown",
    "html": f"{__name__}.html",
}
# shared helpers, and renderings of one document that several formats share: not formats
HELPERS = frozenset(
    {"interface", "outputs", "presentation", "wording", "diff_lines", "units_table", "units_json", "charts"}
)


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
