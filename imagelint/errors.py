"""Error types and the exit codes they map to.

Every error a user can cause or meet is one of these, carries a one-line message (file, line and
column when known) and is turned into that line plus its exit code at the CLI boundary. Exit codes
are stable: CI pipelines depend on them.
"""

from __future__ import annotations

import errno
from enum import IntEnum


class ExitCode(IntEnum):
    PASS = 0
    FAIL = 1
    USAGE = 2  # bad usage, rule pack or config
    INCONCLUSIVE = 3  # the target, or data that is there, could not be read


class ImageLintError(Exception):
    """Base class: a message for the user and the exit code it ends the run with."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, *, where: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class UsageError(ImageLintError):
    """The command line asks for something that cannot be done."""


class RulePackError(ImageLintError):
    """A rule pack is malformed (YAML, schema, unknown kind, bad regex, duplicate id)."""


class ConfigError(ImageLintError):
    """The configuration file is malformed or refers to something unknown."""


class TargetError(ImageLintError):
    """The target as a whole cannot be read (missing root, not a directory)."""

    exit_code = ExitCode.INCONCLUSIVE


class ImageReadError(ImageLintError):
    """One path inside the image cannot be read safely (loop, not a regular file, too large...).

    Raised by targets; a rule that meets it ends in error, which makes the run inconclusive.
    """

    exit_code = ExitCode.INCONCLUSIVE

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason, where=path)
        self.path = path
        self.reason = reason


# No package index serves imagelint: an optional extra is installed from a clone or from its repository.
REPOSITORY = "https://github.com/imagelint/imagelint"


def extra_hint(extra: str) -> str:
    """Commands that install the optional ``extra`` today (tests/test_install_hints.py runs them)."""
    from_git = f"pip install 'imagelint[{extra}] @ git+{REPOSITORY}'"
    return f"pip install '.[{extra}]' in a clone of imagelint, or {from_git}"


# a file of the image this user may not read (an image built as root keeps /root and /etc/shadow to root)
PERMISSION_DENIED = "permission denied: run as root or with sudo"


def os_reason(exc: OSError) -> str:
    """Why an OSError kept a file of the image unread: its message, or for a denied read the way out."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        return PERMISSION_DENIED
    return exc.strerror or str(exc)


class ImageDamageError(ImageLintError):
    """Data in the image is there but the target cannot read it: a corrupt inode, extent tree or
    directory block, an I/O error under a directory target.

    Deliberately not an ImageReadError: fact parsers record an ImageReadError (a link loop, a file
    over the read cap) as a problem of their own and carry on, and damage must never read as an
    absent or empty file. It propagates to the rule that needed the data (an error: the run is
    inconclusive), and the target keeps an account of it for the report (``Target.damaged``).
    """

    exit_code = ExitCode.INCONCLUSIVE

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason, where=path)
        self.path = path
        self.reason = reason


def where_raised(exc: BaseException) -> str:
    """``imagelint/module.py:line`` of the innermost frame inside imagelint that ``exc`` passed
    through (else the innermost frame at all): where to look when reporting an internal error."""
    import os
    import traceback

    marker = f"{os.sep}imagelint{os.sep}"
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if marker in f.filename] or frames
    if not ours:
        return "?"
    path = ours[-1].filename
    path = "imagelint/" + path.rsplit(marker, 1)[1] if marker in path else os.path.basename(path)
    return f"{path}:{ours[-1].lineno}"


def source_location(path: str, line: int | None = None, column: int | None = None) -> str:
    """Format ``file:line:column`` the way compilers and editors expect (1-based)."""
    where = path
    if line is not None:
        where += f":{line}"
        if column is not None:
            where += f":{column}"
    return where
