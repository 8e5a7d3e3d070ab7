"""``imagelint fix --apply``: the plan's steps performed on a root directory, as the script performs them.

Every write goes through :class:`imagelint.remedy.rootdir.RootDir` (paths resolved as a chroot
would, reached without following links); unit steps are :mod:`imagelint.remedy.units`, which
systemctl agrees with. Each step is idempotent: applied twice, the tree is the one applied once.
"""

from __future__ import annotations

import os
import stat

from imagelint.errors import ImageReadError
from imagelint.facts.sshd import SSHD_CONFIG
from imagelint.remedy import sshd_first, units
from imagelint.remedy.plan import Plan, Step
from imagelint.remedy.rootdir import RootDir

MAX_SSHD_CONFIG = 1024 * 1024


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
    path = step["path"]
    with root.parent(path) as (fd, name):
        if fd is None:
            if step.action == "symlink":
                raise ImageReadError(path, "its directory does not exist; the link cannot be made")
            return []
        st = root.lstat(fd, name)
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


def _set_sshd_option(root: RootDir, option: str, value: str) -> list[str]:
    with root.parent(SSHD_CONFIG) as (fd, name):
        if fd is None:
            raise ImageReadError(SSHD_CONFIG, "its directory does not exist")
        st = root.lstat(fd, name)
        old = b""
        if st is not None:
            if not stat.S_ISREG(st.st_mode):
                raise ImageReadError(SSHD_CONFIG, "is not a regular file; not changed")
            with root.opened(fd, name, os.O_RDONLY, SSHD_CONFIG) as ffd:
                old = os.read(ffd, MAX_SSHD_CONFIG + 1)
            if len(old) > MAX_SSHD_CONFIG:
                raise ImageReadError(SSHD_CONFIG, f"is larger than {MAX_SSHD_CONFIG} bytes; not changed")
            if sshd_first.already_set(old.decode("latin-1"), option, value):
                return []
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        wfd = os.open(name, flags, 0o666, dir_fd=fd)
        try:
            os.write(wfd, f"{option} {value}\n".encode() + old)
        finally:
            os.close(wfd)
        return [f"{SSHD_CONFIG} starts with {option} {value}"]
