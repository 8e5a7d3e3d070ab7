"""The system unit search path of an image, as ``systemctl --root=IMAGE`` builds it (systemd 252, Debian).

Order is priority, highest first. Each directory is resolved inside the image and duplicates are
dropped (in a usr-merged image ``/lib/systemd/system`` *is* ``/usr/lib/systemd/system`` and appears
once); a directory that does not exist keeps its name, as systemd's ``path_strv_resolve_uniq()``
does.
"""

from __future__ import annotations

from typing import NamedTuple

from imagelint.errors import ImageReadError
from imagelint.targets.interface import Target

PERSISTENT_CONTROL = "/etc/systemd/system.control"
RUNTIME_CONTROL = "/run/systemd/system.control"
TRANSIENT = "/run/systemd/transient"
GENERATOR_EARLY = "/run/systemd/generator.early"
PERSISTENT_CONFIG = "/etc/systemd/system"
PERSISTENT_ATTACHED = "/etc/systemd/system.attached"
RUNTIME_CONFIG = "/run/systemd/system"
RUNTIME_ATTACHED = "/run/systemd/system.attached"
GENERATOR = "/run/systemd/generator"
GENERATOR_LATE = "/run/systemd/generator.late"

RAW_SEARCH_PATH = (
    PERSISTENT_CONTROL,
    RUNTIME_CONTROL,
    TRANSIENT,
    GENERATOR_EARLY,
    PERSISTENT_CONFIG,
    PERSISTENT_ATTACHED,
    RUNTIME_CONFIG,
    RUNTIME_ATTACHED,
    GENERATOR,
    "/usr/local/lib/systemd/system",
    "/lib/systemd/system",  # Debian builds systemd with split-usr: /lib comes before /usr/lib
    "/usr/lib/systemd/system",
    GENERATOR_LATE,
)

PRESET_DIRS = (
    "/etc/systemd/system-preset",
    "/run/systemd/system-preset",
    "/usr/local/lib/systemd/system-preset",
    "/usr/lib/systemd/system-preset",
    "/lib/systemd/system-preset",
)

_GENERATORS = frozenset({GENERATOR, GENERATOR_EARLY, GENERATOR_LATE})
_RUNTIME_DIRS = frozenset(
    {RUNTIME_CONFIG, GENERATOR, GENERATOR_EARLY, GENERATOR_LATE, TRANSIENT, RUNTIME_CONTROL}
)


def parent_of(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


def basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def path_startswith(path: str, prefix: str) -> str | None:
    """The rest of ``path`` after directory ``prefix`` (``""`` when equal), or None."""
    if path == prefix:
        return ""
    if prefix == "/":
        return path.lstrip("/")
    if path.startswith(prefix + "/"):
        return path[len(prefix) + 1 :]
    return None


class LookupPaths(NamedTuple):
    """The resolved unit search path of one image."""

    search_path: tuple[str, ...]

    @classmethod
    def for_target(cls, target: Target) -> LookupPaths:
        seen: list[str] = []
        for raw in RAW_SEARCH_PATH:
            try:
                resolved = target.resolve(raw)
                if target.lstat(resolved) is None:
                    resolved = raw
            except ImageReadError:
                continue  # systemd drops a search directory it cannot resolve
            if resolved not in seen:
                seen.append(resolved)
        return cls(tuple(seen))

    def in_search_path(self, path: str) -> str | None:
        """The part of ``path`` below the first search directory it lies under, or None."""
        for directory in self.search_path:
            tail = path_startswith(path, directory)
            if tail is not None:
                return tail
        return None

    @staticmethod
    def dir_is_runtime(directory: str) -> bool:
        return path_startswith(directory, "/run") is not None or directory in _RUNTIME_DIRS

    @staticmethod
    def path_is_runtime(path: str) -> bool:
        return path_startswith(path, "/run") is not None or parent_of(path) in _RUNTIME_DIRS

    @staticmethod
    def path_is_generated(path: str) -> bool:
        return parent_of(path) in _GENERATORS

    @staticmethod
    def path_is_transient(path: str) -> bool:
        return parent_of(path) == TRANSIENT
