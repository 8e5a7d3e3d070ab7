"""Output formats: one module per format, each a ``Formatter`` rendering the same ``Report``."""

from __future__ import annotations

import importlib

from imagelint.errors import UsageError
from imagelint.formats.interface import Formatter, RenderOptions

# name → module; imported only when used, so a run pays only for the formats it writes
FORMATS = {
    "text": "imagelint.formats.text",
    "json": "imagelint.formats.json_format",
    "sarif": "imagelint.formats.sarif",
    "junit": "imagelint.formats.junit",
    "github": "imagelint.formats.github",
    "markdown": "imagelint.formats.markdown",
}


def get_formatter(name: str) -> Formatter:
    if name not in FORMATS:
        raise UsageError(f"unknown output format {name!r} (known: {', '.join(FORMATS)})")
    module = importlib.import_module(FORMATS[name])
    return module.FORMATTER  # type: ignore[no-any-return]


__all__ = ["FORMATS", "Formatter", "RenderOptions", "get_formatter"]
