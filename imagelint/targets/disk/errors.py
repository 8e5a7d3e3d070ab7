"""Why a disk image could not be read: one line each, and the run is inconclusive (exit 3)."""

from __future__ import annotations

from imagelint.errors import ExitCode, TargetError, UsageError, extra_hint

EXTRA_HINT = extra_hint("disk")


class DiskImageError(TargetError):
    """The image as a whole cannot be read (truncated, corrupt table, no root, encrypted, dirty)."""

    exit_code = ExitCode.INCONCLUSIVE


class NoRootFilesystem(DiskImageError):
    """Filesystems were read, none of them an OS tree (a data volume): nothing to audit as an image."""


class MissingExtraError(UsageError):
    """The dissect libraries are not installed (exit 2: the install, not the image, is at fault)."""


def require_dissect() -> None:
    """Raise MissingExtraError naming the extra when the dissect libraries are not installed.

    They are found, not imported: each is imported when an image needs it (dissect compiles its
    structure definitions at import, a cost paid only for the formats an image uses)."""
    from importlib.util import find_spec

    for name in ("dissect.extfs", "dissect.hypervisor", "dissect.volume", "dissect.xfs"):
        try:
            found = find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise MissingExtraError(
                f"reading disk images needs the optional disk extra ({name} is missing): {EXTRA_HINT}"
            )


def shown(raw: bytes | str, limit: int = 120) -> str:
    """A name read from the image, fit for the one stderr line: printable ASCII, escapes for the rest, cut."""
    text = raw.decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else raw
    escaped = text[:limit].encode("unicode_escape").decode("ascii").replace('"', '\\"')
    return escaped + ("..." if len(text) > limit else "")
