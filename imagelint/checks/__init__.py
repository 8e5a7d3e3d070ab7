"""Check kinds: the Python half of the rules. Each kind registers itself here by name.

Kinds are found by discovery: every module of this package (but the plumbing named in
``_NOT_KINDS``) is imported on first use, and its ``@register`` classes become available to rule
packs. A new kind is one module here plus its test; nothing else lists it.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, TypeVar

from imagelint.checks.base import CheckContext, CheckKind, NotApplicable, Observation
from imagelint.checks.params import ParamError

K = TypeVar("K", bound=CheckKind[Any])
_REGISTRY: dict[str, CheckKind[Any]] = {}
_NOT_KINDS = frozenset({"base", "params"})  # modules of this package that define no kind
_discovered = False


def register(cls: type[K]) -> type[K]:
    """Class decorator: make a check kind available to rule packs under ``cls.name``."""
    if cls.name in _REGISTRY:
        raise RuntimeError(f"check kind {cls.name} registered twice")
    _REGISTRY[cls.name] = cls()
    return cls


def unregister(name: str) -> None:
    """Remove a kind registered by name (for kinds a test or plug-in registered for a while)."""
    _REGISTRY.pop(name, None)


def kind_modules() -> list[str]:
    """The modules of this package that define check kinds, by name."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _NOT_KINDS)


def registry() -> dict[str, CheckKind[Any]]:
    """All check kinds, by name (importing the modules that define them on first use)."""
    global _discovered
    if not _discovered:
        for name in kind_modules():
            importlib.import_module(f"{__name__}.{name}")
        _discovered = True
    return _REGISTRY


__all__ = [
    "CheckContext",
    "CheckKind",
    "NotApplicable",
    "Observation",
    "ParamError",
    "register",
    "registry",
    "unregister",
]
