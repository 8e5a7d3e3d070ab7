"""Why a disk image could not be read: one line each, and the run is inconclusive (exit 3)."""

from __future__ import annotations

from imagelint.errors import ExitCode, TargetError, UsageError

EXTRA_HINT = "pip install 'imagelint[disk]'"


class DiskImageError(TargetError):
    """The image as a whole cannot be read (truncated, corrupt table, no root, encrypted, dirty)."""

    exit_code = ExitCode.INCONCLUSIVE


class MissingExtraError(UsageError):
    """The dissect libraries are not installed (exit 2: the install, not the image, is at fault)."""


def require_dissect() -> None:
    """Raise MissingExtraError naming the extra when the dissect libraries are not importable."""
    try:
        import dissect.extfs
        import dissect.hypervisor
        import dissect.volume
        import dissect.xfs  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError(
            f"reading disk images needs the optional disk extra ({exc.name} is missing): {EXTRA_HINT}"
        ) from None
