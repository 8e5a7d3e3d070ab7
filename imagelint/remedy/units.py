"""``systemctl --root=ROOT disable|mask UNIT…`` done here, exactly as systemd 252's ``install.c`` does it.

*disable* (``unit_file_disable``): each name, and every name its lookup adds (the target of an
alias, the units of ``Also=``), is looked up with the project's own lookup
(:class:`imagelint.facts.systemd.install.InstallResolver`, the one the audit's enablement uses);
each name whose lookup fails, or finds a regular unit, is marked (a masked unit or an alias is not).
Then ``/etc/systemd/system`` is walked in directory order (``remove_marked_symlinks_fd``): every
link with a valid unit name is removed when its name, its template, or the base name of the path its
chain of links resolves to (inside the image) is marked; its emptied parent directories go with it.
Like systemctl, the resolution is done when the link is reached, so a link that led through a link
removed earlier in the walk is kept; and the full path of a removed link is marked again, which
matches another link's destination only when the root is ``/`` (systemctl compares it with a path
that carries the root prefix otherwise).

*mask* (``unit_file_mask``): ``/etc/systemd/system/UNIT`` becomes a link to ``/dev/null``; an
existing link to ``/dev/null`` is left, anything else there is an error and nothing changes.
"""

from __future__ import annotations

import contextlib
import os
import stat

from imagelint.errors import ImageReadError
from imagelint.facts.systemd import names
from imagelint.facts.systemd.install import MASKED, REGULAR, InstallError, InstallInfo, InstallResolver
from imagelint.facts.systemd.paths import PERSISTENT_CONFIG, LookupPaths, basename
from imagelint.facts.systemd.sources import DirectoryTooLargeError, ImageTree
from imagelint.remedy.rootdir import RootDir
from imagelint.targets.interface import FileKind

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_PASSES = 64  # a pass only repeats when it marked a new path: bounded by the links it removed


class UnitFixError(ImageReadError):
    """systemctl would fail here too (a mask over a file of the unit's name)."""


def marked_for_removal(root: RootDir, units: list[str]) -> set[str]:
    """install_context_mark_for_removal(): the names whose links disable removes."""
    target = root.target()
    resolver = InstallResolver(ImageTree(target), LookupPaths.for_target(target))
    ctx: dict[str, InstallInfo] = {name: InstallInfo(name) for name in units}
    processed: set[str] = set()
    marked: set[str] = set()
    while True:
        name = next((n for n in ctx if n not in processed), None)
        if name is None:
            return marked
        processed.add(name)
        info = ctx[name]
        try:
            resolver.traverse(ctx, info)
        except DirectoryTooLargeError:
            raise
        except (InstallError, ImageReadError):
            pass  # not found, or cannot be looked up: systemctl still removes links by the name
        else:
            if info.mode == MASKED or info.mode != REGULAR:
                continue
        marked.add(name)


def disable(root: RootDir, units: list[str]) -> list[str]:
    """Disable ``units`` in the tree; the image paths of the links removed, in order."""
    marked = marked_for_removal(root, units)
    removed: list[str] = []
    if not marked:
        return removed
    with root.parent(PERSISTENT_CONFIG) as (parent, name):
        if parent is None:
            return removed
        try:
            fd = os.open(name, _DIR, dir_fd=parent)
        except OSError:
            return removed  # absent, or a link: systemctl opens it with O_NOFOLLOW too
        try:
            for _ in range(MAX_PASSES):
                restart = _remove_pass(root, fd, PERSISTENT_CONFIG, [], marked, removed)
                if not restart:
                    break
        finally:
            os.close(fd)
    return removed


def _remove_pass(
    root: RootDir,
    fd: int,
    image_dir: str,
    ancestors: list[tuple[int, str]],
    marked: set[str],
    removed: list[str],
) -> bool:
    """remove_marked_symlinks_fd() on one directory: True when a new path was marked."""
    restart = False
    with os.scandir(fd) as it:
        entries = [(e.name, e.is_dir(follow_symlinks=False), e.is_symlink()) for e in it]
    for name, is_dir, is_link in entries:
        path = f"{image_dir}/{name}"
        if is_dir:
            try:
                sub = os.open(name, _DIR, dir_fd=fd)
            except OSError:
                continue
            try:
                restart |= _remove_pass(root, sub, path, [*ancestors, (fd, name)], marked, removed)
            finally:
                os.close(sub)
            continue
        if not is_link or not names.is_valid(name):
            continue
        template = names.template_of(name)
        found = name in marked or (template is not None and template in marked)
        if not found:
            dest = _chase(root, path)
            if dest is None:
                continue
            found = root.host(dest) in marked or basename(dest) in marked
        if not found:
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=fd)
        _rmdir_parents(ancestors)
        removed.append(path)
        if path not in marked:
            marked.add(path)
            restart = True
    return restart


def _chase(root: RootDir, image_path: str) -> str | None:
    """chase_symlinks(CHASE_NONEXISTENT) inside the image: the path the link leads to, None on error
    (a loop, or a component that exists and is not a directory)."""
    target = root.target()
    try:
        dest = target.resolve(image_path)
        parts = [p for p in dest.split("/") if p]
        for i in range(1, len(parts)):
            st = target.lstat("/" + "/".join(parts[:i]))
            if st is None:
                break
            if st.kind is not FileKind.DIR:
                return None
    except ImageReadError:
        return None
    return dest


def _rmdir_parents(ancestors: list[tuple[int, str]]) -> None:
    """rmdir_parents(): the emptied directories between the link and /etc/systemd/system."""
    for parent_fd, name in reversed(ancestors):
        try:
            os.rmdir(name, dir_fd=parent_fd)
        except FileNotFoundError:
            continue
        except OSError:
            return


def mask(root: RootDir, units: list[str]) -> list[str]:
    """Mask ``units``; the image paths of the links created. Like systemctl, a unit that cannot be
    masked does not stop the others; the first such error is raised at the end."""
    created: list[str] = []
    errors: list[UnitFixError] = []
    for unit in units:
        path = f"{PERSISTENT_CONFIG}/{unit}"
        with root.parent(path, create=True) as (parent, name):
            assert parent is not None
            try:
                os.symlink("/dev/null", name, dir_fd=parent)
                created.append(path)
                continue
            except FileExistsError:
                pass
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if not stat.S_ISLNK(st.st_mode):
                errors.append(UnitFixError(path, "exists and is not a link; systemctl mask refuses it too"))
            elif not _same_as_dev_null(root, path, os.readlink(name, dir_fd=parent)):
                errors.append(
                    UnitFixError(path, "links elsewhere; systemctl mask refuses it without --force")
                )
    if errors:
        raise errors[0]
    return created


def _same_as_dev_null(root: RootDir, path: str, dest: str) -> bool:
    """chroot_unit_symlinks_equivalent() for the target /dev/null."""
    joined = dest if dest.startswith("/") else f"{path.rsplit('/', 1)[0]}/{dest}"
    simple = "/" + "/".join(p for p in joined.split("/") if p and p != ".")
    if simple == "/dev/null":
        return True
    target = root.target()
    try:
        a, b = target.resolve(simple), target.resolve("/dev/null")
        return a == b and target.lstat(a) is not None
    except ImageReadError:
        return False
