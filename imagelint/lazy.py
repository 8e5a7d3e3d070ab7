"""Packages that re-export names of their modules without importing them until one is used.

A package's ``__init__`` that imported its modules eagerly made every import of any one submodule
(``imagelint.report.escape``, which the error line on stderr needs) pay for the whole package and
what it imports (the report model, the rule packs, the YAML loader, every check kind). With
:func:`exports`, ``from imagelint.report import Finding`` still works, and imports
``imagelint.report.model`` at that moment; type checkers see the names through the package's
``if TYPE_CHECKING:`` imports.

:func:`regex` does the same for a module's regular expressions: compiled on first use, so that
importing a module does not compile patterns the run never matches (``re`` compiles in Python).
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Mapping
from typing import Any


def exports(package: str, modules: Mapping[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name in ``modules[m]`` comes from ``package.m``."""
    source = {name: f"{package}.{module}" for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in source:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source[name]), name)
        setattr(importlib.import_module(package), name, value)  # the next use is a plain lookup
        return value

    return __getattr__


def regex(source: str, flags: int = 0) -> Callable[[], re.Pattern[str]]:
    """``source`` compiled on the first call, the same pattern on every call after it."""
    return functools.cache(lambda: re.compile(source, flags))
