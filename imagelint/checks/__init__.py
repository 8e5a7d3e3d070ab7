"""Check kinds: the Python half of the rules. Each kind registers itself by name.

The contract and the registry are in :mod:`imagelint.checks.base`; this package's other modules
(but ``params``) each define kinds, found by discovery on first use of :func:`registry`.
"""

from __future__ import annotations

from imagelint.checks.base import (
    CheckContext,
    CheckKind,
    NotApplicable,
    Observation,
    kind_modules,
    register,
    registry,
    unregister,
)
from imagelint.checks.params import ParamError

__all__ = [
    "CheckContext",
    "CheckKind",
    "NotApplicable",
    "Observation",
    "ParamError",
    "kind_modules",
    "register",
    "registry",
    "unregister",
]
