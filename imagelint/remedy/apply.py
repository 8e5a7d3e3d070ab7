"""``imagelint fix --apply``: the plan's steps performed on a root directory, as the script performs them.

Every write goes through :class:`imagelint.remedy.rootdir.RootDir`, reached without following
links. A file step's path is the canonical one the audit resolved, taken as written: a link on the way
to it is refused (exit 3), as the printed script refuses it, so both act, or refuse, alike
(``tests/remedy/test_links.py``). Unit steps are :mod:`imagelint.remedy.units`, which systemctl
agrees with. Each step is idempotent: applied twice, the tree is the one applied once.
"""

from __future__ import annotations

import fnmatch
import os
import stat

from imagelint.errors import ImageReadError
from imagelint.facts.sshd import SSHD_CONFIG
from imagelint.remedy import sshd_first, units
from imagelint.remedy.plan import Plan, Step
from imagelint.remedy.rootdir import RootDir

MAX_SSHD_CONFIG = 1024 * 1024
SHADOW = "/etc/shadow"
MAX_SHADOW = 16 * 1024 * 1024


def apply_plan(plan: Plan, root: RootDir) -> list[str]:
    """Perform every step in order; what changed, one line per change."""
    changes: list[str] = []
    for step in plan.steps:
        changes.extend(f"{step.action}: {what}" for what in _apply(step, root))
    return changes


def _apply(step: Step, root: RootDir) -> list[str]:
    if step.action == "disable-unit":
        return [f"removed {p}" for p in units.disable(root, [step["unit"]])]
    if step.action == "mask-unit":
        return [f"linked {p} to /dev/null" for p in units.mask(root, [step["unit"]])]
    if step.action == "set-sshd-option":
        return _set_sshd_option(root, step["option"], step["value"])
    if step.action == "lock-password":
        return _lock_password(root, step["user"])
    path = step["path"]
    with root.parent(path, resolve=False) as (fd, name):
        if fd is None:
            if step.action == "symlink":
                raise ImageReadError(path, "its directory does not exist; the link cannot be made")
            return []
        st = root.lstat(fd, name)
        if step.action == "remove-matching":
            return _remove_matching(root, fd, name, path, step["match"])
        if step.action == "remove-path":
            return [f"removed {path}"] if root.remove(fd, name) else []
        if step.action == "empty-file":
            if st is not None and stat.S_ISLNK(st.st_mode):
                raise ImageReadError(path, "is a link; not followed")
            if st is None or not stat.S_ISREG(st.st_mode) or st.st_size == 0:
                return []
            with root.opened(fd, name, os.O_WRONLY | os.O_TRUNC, path):
                return [f"emptied {path}"]
        if step.action == "symlink":
            wanted = step["target"]
            if st is not None and stat.S_ISLNK(st.st_mode) and os.readlink(name, dir_fd=fd) == wanted:
                return []
            root.remove(fd, name)
            os.symlink(wanted, name, dir_fd=fd)
            return [f"linked {path} to {wanted}"]
        if step.action == "chmod":
            if st is not None and stat.S_ISLNK(st.st_mode):
                raise ImageReadError(path, "is a link; not followed")
            if st is None:
                return []
            clear = int(step["clear"], 8)
            if not stat.S_IMODE(st.st_mode) & clear:
                return []
            with root.opened(fd, name, os.O_RDONLY, path) as ffd:
                os.fchmod(ffd, stat.S_IMODE(st.st_mode) & ~clear)
            return [f"cleared {clear:04o} on {path}"]
    raise ValueError(f"unknown fix action {step.action}")


def _remove_matching(root: RootDir, fd: int, name: str, path: str, pattern: str) -> list[str]:
    """What ``rm -rf -- DIR/PATTERN`` removes: names matching the pattern, a leading dot only by a dot."""
    try:
        dfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ImageReadError(path, f"is not a directory reached without a link: {exc.strerror}") from None
    try:
        matched = sorted(
            entry
            for entry in os.listdir(dfd)
            if fnmatch.fnmatchcase(entry, pattern) and (not entry.startswith(".") or pattern.startswith("."))
        )
        return [f"removed {path}/{entry}" for entry in matched if root.remove(dfd, entry)]
    finally:
        os.close(dfd)


def _unlocked(fields: list[str], user: str) -> bool:
    return len(fields) > 1 and fields[0] == user and not fields[1].startswith("!")


def locked_shadow(text: str, user: str) -> str | None:
    """/etc/shadow with a ``!`` before ``user``'s hash, as ``passwd -l`` writes it; None when locked."""
    rows = [line.split(":") for line in text.splitlines()]
    if not any(_unlocked(fields, user) for fields in rows):
        return None
    for fields in rows:
        if _unlocked(fields, user):
            fields[1] = "!" + fields[1]
    return "".join(":".join(fields) + "\n" for fields in rows)


def _read_bounded(root: RootDir, fd: int, name: str, path: str, limit: int) -> bytes | None:
    """A small regular file's bytes (None when absent), refused when it is anything else or larger."""
    st = root.lstat(fd, name)
    if st is None:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise ImageReadError(path, "is not a regular file; not changed")
    with root.opened(fd, name, os.O_RDONLY, path) as ffd:
        data = os.read(ffd, limit + 1)
    if len(data) > limit:
        raise ImageReadError(path, f"is larger than {limit} bytes; not changed")
    return data


def _lock_password(root: RootDir, user: str) -> list[str]:
    with root.parent(SHADOW, resolve=False) as (fd, name):
        old = None if fd is None else _read_bounded(root, fd, name, SHADOW, MAX_SHADOW)
        new = None if old is None else locked_shadow(old.decode("utf-8", "surrogateescape"), user)
        if fd is None or new is None:
            return []
        # the same inode: its owner and mode stay, as the script's `cat >` keeps them
        with root.opened(fd, name, os.O_WRONLY | os.O_TRUNC, SHADOW) as ffd:
            os.write(ffd, new.encode("utf-8", "surrogateescape"))
        return [f"{SHADOW}: {user}'s password locked"]


def _set_sshd_option(root: RootDir, option: str, value: str) -> list[str]:
    with root.parent(SSHD_CONFIG, resolve=False) as (fd, name):
        if fd is None:
            raise ImageReadError(SSHD_CONFIG, "its directory does not exist")
        old = _read_bounded(root, fd, name, SSHD_CONFIG, MAX_SSHD_CONFIG) or b""
        if old and sshd_first.already_set(old.decode("latin-1"), option, value):
            return []
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        wfd = os.open(name, flags, 0o666, dir_fd=fd)
        try:
            os.write(wfd, f"{option} {value}\n".encode() + old)
        finally:
            os.close(wfd)
        return [f"{SSHD_CONFIG} starts with {option} {value}"]
