"""Check kinds: the Python half of the rules. Each kind registers itself by name.

The contract and the registry are in :mod:`imagelint.checks.base`; the modules that define kinds are
listed there (``KIND_MODULES``) and imported on first use of :func:`registry`.
"""

from __future__ import annotations

from imagelint.checks.base import (
    KIND_MODULES,
    CheckContext,
    CheckKind,
    NotApplicable,
    Observation,
    register,
    registry,
    unregister,
)
from imagelint.checks.params import ParamError

__all__ = [
    "KIND_MODULES",
    "CheckContext",
    "CheckKind",
    "NotApplicable",
    "Observation",
    "ParamError",
    "register",
    "registry",
    "unregister",
]
