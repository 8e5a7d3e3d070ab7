"""Memory cgroups of the running host, read live: the layout, the samples, and the memory.stat walk.

:func:`detect_layout` finds the hierarchies under ``/sys/fs/cgroup`` and the memory row of
``/proc/cgroups``. :class:`CgroupSampler` reads the ``cgroup.stat`` files and ``/proc/cgroups`` and
counts the live v1 memory directories (never following a symlink), then hands what it read to
:mod:`imagelint.facts.cgroups` (the parsers and :func:`~imagelint.facts.cgroups.sample_from_counts`),
which a bundle's recorded samples go to as well.

Run it in the host's cgroup and mount namespace: a container sees only its part of the tree.

The *symptom probe* (:func:`probe_memory_stat`) times what kubelet and cAdvisor do: read
``memory.stat`` of every live memory cgroup. Its cost grows with the dying cgroups behind it.

Both roots are parameters, so the probes run on recorded trees in tests.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

from imagelint.facts.cgroups import (
    CgroupLayout,
    CgroupReadError,
    CgroupStat,
    ProbeResult,
    Sample,
    SubtreeCount,
    decide_layout,
    parse_cgroup_stat,
    parse_proc_cgroups,
    sample_from_counts,
    v2_subtree,
)

DEFAULT_PROC_ROOT = "/proc"
DEFAULT_CGROUP_ROOT = "/sys/fs/cgroup"
DEFAULT_MAX_SUBTREES = 256
_READ_LIMIT = 1 << 20


# --------------------------------------------------------------------------------------------------
# Layout


def _read_text(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(_READ_LIMIT).decode("utf-8", "replace")
    except OSError as exc:
        raise CgroupReadError(exc.strerror or str(exc), where=str(path)) from None


def _is_v1_memory_dir(path: Path) -> bool:
    return (path / "memory.usage_in_bytes").exists() or (path / "memory.limit_in_bytes").exists()


def detect_layout(
    proc_root: str | Path = DEFAULT_PROC_ROOT, cgroup_root: str | Path = DEFAULT_CGROUP_ROOT
) -> CgroupLayout:
    """Find the v2 root (``cgroup_root`` itself or ``cgroup_root/unified``) and the v1 memory mount,
    and let :func:`imagelint.facts.cgroups.decide_layout` say which holds memory."""
    proc = Path(proc_root)
    root = Path(cgroup_root)
    rows = parse_proc_cgroups(_read_text(proc / "cgroups"), where=str(proc / "cgroups"))

    v2_path: Path | None = None
    if (root / "cgroup.controllers").is_file():
        v2_path = root
    elif (root / "unified" / "cgroup.controllers").is_file():
        v2_path = root / "unified"
    v2_controllers: tuple[str, ...] = ()
    if v2_path is not None:
        v2_controllers = tuple(_read_text(v2_path / "cgroup.controllers").split())

    v1_memory_path: Path | None = None
    if v2_path != root:
        candidate = root / "memory"
        if candidate.is_dir():  # follows a "memory -> memory,foo" co-mount link by design
            candidate = Path(os.path.realpath(candidate))
            if _is_v1_memory_dir(candidate):
                v1_memory_path = candidate

    return decide_layout(
        rows, root, v2_path, v2_controllers, v1_memory_path, lambda name: (root / name).is_dir()
    )


# --------------------------------------------------------------------------------------------------
# Directory walk (v1)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _subdirs(dir_fd: int) -> list[tuple[str, int]]:
    """(name, st_nlink) of the subdirectories of an open directory; symlinks are not directories here.

    ``DirEntry.stat`` on a scandir of a descriptor is an ``fstatat`` relative to it: one path
    component to resolve instead of the whole path, which is most of a stat's cost in sysfs.
    """
    out = []
    with os.scandir(dir_fd) as it:
        for entry in it:
            try:
                if entry.is_dir(follow_symlinks=False):
                    out.append((entry.name, entry.stat(follow_symlinks=False).st_nlink))
            except FileNotFoundError:
                continue  # removed while we walked: no longer live
    return out


def _count_below(parent_fd: int, name: str, nlink: int) -> int:
    """Directories strictly below ``parent_fd/name``, never following a symlink.

    kernfs (like ext4 and tmpfs) gives a directory ``st_nlink == 2 + number of subdirectories``, so
    a leaf (nlink 2) is never opened: with thousands of leaf memcgs of ~30 files each, that is
    most of the work saved. Any other nlink (btrfs reports 1) means: look inside.
    """
    if nlink == 2:
        return 0
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    try:
        children = _subdirs(fd)
        return len(children) + sum(_count_below(fd, n, k) for n, k in children)
    finally:
        os.close(fd)


def count_memory_dirs(v1_memory_path: str | Path, *, subtree_depth: int = 2) -> tuple[int, dict[str, int]]:
    """Live v1 memory cgroups: the directories under the mount, root included; and per subtree.

    The per-subtree map has every first-level directory and those second-level ones (up to
    ``subtree_depth``) that have children of their own, each with the directories at and below it.
    Each directory is stat'ed once (from its parent's listing); only directories with
    subdirectories are opened.
    """
    per_subtree: dict[str, int] = {}
    total = 1
    root_fd = os.open(v1_memory_path, _DIR_FLAGS & ~os.O_NOFOLLOW)
    try:
        for name1, nlink1 in _subdirs(root_fd):
            if subtree_depth >= 2 and nlink1 != 2:
                try:
                    fd1 = os.open(name1, _DIR_FLAGS, dir_fd=root_fd)
                except (FileNotFoundError, NotADirectoryError):
                    continue
                try:
                    sub_total = 1
                    for name2, nlink2 in _subdirs(fd1):
                        below = _count_below(fd1, name2, nlink2)
                        sub_total += 1 + below
                        if below:
                            per_subtree[f"{name1}/{name2}"] = 1 + below
                finally:
                    os.close(fd1)
            else:
                sub_total = 1 + _count_below(root_fd, name1, nlink1)
            if subtree_depth >= 1:
                per_subtree[name1] = sub_total
            total += sub_total
    finally:
        os.close(root_fd)
    return total, per_subtree


def list_memory_dirs(v1_memory_path: str | Path) -> list[str]:
    """Every memory cgroup directory, root first, not following symlinks (for the symptom probe)."""
    out = [str(v1_memory_path)]
    i = 0
    while i < len(out):
        try:
            with os.scandir(out[i]) as it:
                out.extend(e.path for e in it if e.is_dir(follow_symlinks=False))
        except (FileNotFoundError, NotADirectoryError):
            pass
        i += 1
    return out


# --------------------------------------------------------------------------------------------------
# Samples


class CgroupSampler:
    """Takes :class:`Sample` s. The layout is detected once, at construction.

    ``subtree_depth`` (0, 1 or 2) limits the per-subtree detail; ``max_subtrees`` caps how many v2
    ``cgroup.stat`` files one sample reads (second-level ones are read only under first-level
    subtrees that have dying descendants).
    """

    def __init__(
        self,
        proc_root: str | Path = DEFAULT_PROC_ROOT,
        cgroup_root: str | Path = DEFAULT_CGROUP_ROOT,
        *,
        subtree_depth: int = 2,
        max_subtrees: int = DEFAULT_MAX_SUBTREES,
    ) -> None:
        self.proc_root = Path(proc_root)
        self.cgroup_root = Path(cgroup_root)
        self.subtree_depth = subtree_depth
        self.max_subtrees = max_subtrees
        self.layout = detect_layout(self.proc_root, self.cgroup_root)

    def sample(self) -> Sample:
        mono, wall = time.monotonic(), time.time()
        layout = self.layout
        v2_root: CgroupStat | None = None
        subtrees: list[SubtreeCount] = []
        truncated = False
        if layout.v2_path is not None:
            stat_path = layout.v2_path / "cgroup.stat"
            v2_root = parse_cgroup_stat(_read_text(stat_path), where=str(stat_path))
            truncated = self._v2_subtrees(layout.v2_path, v2_root, subtrees)

        if layout.memory == "v1":
            assert layout.v1_memory_path is not None
            proc_path = self.proc_root / "cgroups"
            proc_text = _read_text(proc_path)
            try:
                live, per_subtree = count_memory_dirs(layout.v1_memory_path, subtree_depth=self.subtree_depth)
            except OSError as exc:
                raise CgroupReadError(exc.strerror or str(exc), where=str(layout.v1_memory_path)) from None
            v1_subtrees = tuple(SubtreeCount(p, "v1", n, None) for p, n in per_subtree.items())
            return sample_from_counts(
                mono,
                wall,
                layout,
                v2_root,
                (*v1_subtrees, *subtrees),
                truncated,
                proc_cgroups=(proc_text, str(proc_path)),
                v1_dirs=live,
            )
        return sample_from_counts(mono, wall, layout, v2_root, tuple(subtrees), truncated)

    def _v2_subtrees(self, v2_path: Path, root_stat: CgroupStat, out: list[SubtreeCount]) -> bool:
        if self.subtree_depth < 1 or root_stat.nr_descendants == 0:
            return False
        budget = self.max_subtrees
        deeper: list[tuple[str, str]] = []
        try:
            with os.scandir(v2_path) as it:
                level1 = sorted((e.name, e.path) for e in it if e.is_dir(follow_symlinks=False))
        except OSError as exc:
            raise CgroupReadError(exc.strerror or str(exc), where=str(v2_path)) from None
        for name, path in level1:
            if budget <= 0:
                return True
            stat = self._subtree_stat(path)
            if stat is None:
                continue
            budget -= 1
            out.append(v2_subtree(name, stat))
            if stat.nr_dying_descendants > 0 and stat.nr_descendants + stat.nr_dying_descendants > 0:
                deeper.append((name, path))
        if self.subtree_depth < 2:
            return False
        for name1, path1 in deeper:
            try:
                with os.scandir(path1) as it:
                    level2 = sorted((e.name, e.path) for e in it if e.is_dir(follow_symlinks=False))
            except FileNotFoundError:
                continue
            for name2, path2 in level2:
                if budget <= 0:
                    return True
                stat = self._subtree_stat(path2)
                if stat is None:
                    continue
                budget -= 1
                out.append(v2_subtree(f"{name1}/{name2}", stat))
        return False

    @staticmethod
    def _subtree_stat(path: str) -> CgroupStat | None:
        stat_path = os.path.join(path, "cgroup.stat")
        try:
            with open(stat_path, "rb") as fh:
                text = fh.read(_READ_LIMIT).decode("utf-8", "replace")
        except FileNotFoundError:
            return None  # removed while we looked
        except OSError as exc:
            raise CgroupReadError(exc.strerror or str(exc), where=stat_path) from None
        return parse_cgroup_stat(text, where=stat_path)


# --------------------------------------------------------------------------------------------------
# Symptom probe


def thread_cpu() -> float:
    """CPU time of the calling thread so far, user + system (the kernel's work on its behalf counts)."""
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime


def _memory_cgroup_dirs(layout: CgroupLayout) -> list[str]:
    if layout.memory == "v1" and layout.v1_memory_path is not None:
        return list_memory_dirs(layout.v1_memory_path)
    if layout.memory == "v2" and layout.v2_path is not None:
        return [d for d in list_memory_dirs(layout.v2_path) if os.path.exists(os.path.join(d, "memory.stat"))]
    return []


def probe_memory_stat(layout: CgroupLayout) -> ProbeResult:
    """Time a read of every live memory cgroup's ``memory.stat``, as kubelet and cAdvisor do.

    The directory listing is made first and is not timed; wall and CPU time (this thread, user +
    system: the kernel's work is system time) cover the reads only. A cgroup removed meanwhile is
    counted in ``errors``.
    """
    dirs = _memory_cgroup_dirs(layout)
    errors = 0
    total = 0
    cpu0, t0 = thread_cpu(), time.perf_counter()
    for d in dirs:
        try:
            fd = os.open(os.path.join(d, "memory.stat"), os.O_RDONLY)
        except OSError:
            errors += 1
            continue
        try:
            while chunk := os.read(fd, 65536):
                total += len(chunk)
        except OSError:
            errors += 1
        finally:
            os.close(fd)
    seconds, cpu = time.perf_counter() - t0, thread_cpu() - cpu0
    return ProbeResult(layout.memory, len(dirs) - errors, seconds, cpu, total, errors)
