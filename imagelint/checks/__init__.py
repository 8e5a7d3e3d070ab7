"""Check kinds: the Python half of the rules. Each kind registers itself here by name."""

from __future__ import annotations

from imagelint.checks.base import CheckContext, CheckKind, NotApplicable, Observation, ParamError

_REGISTRY: dict[str, CheckKind] = {}


def register(cls: type[CheckKind]) -> type[CheckKind]:
    """Class decorator: make a check kind available to rule packs under ``cls.name``."""
    if cls.name in _REGISTRY:
        raise RuntimeError(f"check kind {cls.name} registered twice")
    _REGISTRY[cls.name] = cls()
    return cls


def registry() -> dict[str, CheckKind]:
    """All check kinds, by name (importing the modules that define them on first use)."""
    from imagelint.checks import (  # noqa: F401 - registration happens on import
        cgroups,
        cpu,
        files,
        journal,
        sshd,
        systemd,
        waivers,
    )

    return _REGISTRY


__all__ = ["CheckContext", "CheckKind", "NotApplicable", "Observation", "ParamError", "register", "registry"]
