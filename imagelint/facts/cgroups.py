"""Memory-cgroup counts from the host: live and dying ("zombie") memcgs, on cgroup v1, v2 and hybrids.

A memory cgroup that was removed (``rmdir``) while page cache was still charged to it stays
allocated in the kernel as a *dying* cgroup until those pages go. Thousands of them make every walk
over the memory hierarchy (kubelet, cAdvisor, reclaim) slow. This module counts them, read-only:

- **cgroup v2** (memory controller on the unified hierarchy): the root ``cgroup.stat``. Kernels
  since about 6.11 print ``nr_subsys_memory`` (live memory csses at and beneath the cgroup) and
  ``nr_dying_subsys_memory``; older kernels only ``nr_descendants`` / ``nr_dying_descendants``
  (every controller together), which is used as the fallback. Each sample says which it used.
  ``cgroup.stat`` of the subtrees one and two levels down localises growth to a slice or a unit.
- **cgroup v1** (memory controller on its own hierarchy, as in the incident): the ``memory`` row of
  ``/proc/cgroups`` counts live *and* dying memcgs; the directories under the memory mount are the
  live ones. dying = num_cgroups − directories. The walk never follows a symlink.
- **hybrid** (systemd's layout with a v1 memory controller beside a v2 ``unified`` hierarchy that
  has no memory controller, as on the machines this was written on): the memory count comes from
  v1; the unified hierarchy's ``cgroup.stat`` is reported beside it.

Run it in the host's cgroup and mount namespace: a container sees only its part of the tree.

The *symptom probe* (:func:`probe_memory_stat`) times what kubelet and cAdvisor do: read
``memory.stat`` of every live memory cgroup. Its cost grows with the dying cgroups behind it.

Both roots are parameters, so the parsers run on recorded trees in tests.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from imagelint.errors import ExitCode, ImageLintError

Layout = Literal["v1", "v2", "hybrid", "none"]
Hierarchy = Literal["v1", "v2"]
DyingSource = Literal["nr_dying_subsys_memory", "nr_dying_descendants", "proc_cgroups_minus_dirs"]

DEFAULT_PROC_ROOT = "/proc"
DEFAULT_CGROUP_ROOT = "/sys/fs/cgroup"
DEFAULT_MAX_SUBTREES = 256
_READ_LIMIT = 1 << 20


class CgroupReadError(ImageLintError):
    """A cgroup file that should be there could not be read or parsed: the sample is inconclusive."""

    exit_code = ExitCode.INCONCLUSIVE


# --------------------------------------------------------------------------------------------------
# Parsers (pure)


@dataclass(frozen=True)
class CgroupStat:
    """One parsed v2 ``cgroup.stat`` file.

    ``subsys`` and ``dying_subsys`` hold the per-controller ``nr_subsys_<ctrl>`` and
    ``nr_dying_subsys_<ctrl>`` keys; they are empty on kernels that do not print them.
    """

    nr_descendants: int
    nr_dying_descendants: int
    subsys: dict[str, int] = field(default_factory=dict)
    dying_subsys: dict[str, int] = field(default_factory=dict)
    other: dict[str, int] = field(default_factory=dict)

    @property
    def has_memory_counts(self) -> bool:
        return "memory" in self.subsys and "memory" in self.dying_subsys

    def to_dict(self) -> dict[str, Any]:
        return {
            "nr_descendants": self.nr_descendants,
            "nr_dying_descendants": self.nr_dying_descendants,
            "nr_subsys": dict(self.subsys),
            "nr_dying_subsys": dict(self.dying_subsys),
        }


def parse_cgroup_stat(text: str, *, where: str = "cgroup.stat") -> CgroupStat:
    """Parse a v2 ``cgroup.stat`` (flat keyed: one ``key value`` per line). Unknown keys are kept."""
    values: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise CgroupReadError(f"line {lineno}: expected 'key value', got {line!r}", where=where)
        if not _is_count(parts[1]):
            raise CgroupReadError(f"line {lineno}: value of {parts[0][:80]!r} is not a count", where=where)
        values[parts[0]] = int(parts[1])
    for key in ("nr_descendants", "nr_dying_descendants"):
        if key not in values:
            raise CgroupReadError(f"no {key} key", where=where)
    subsys: dict[str, int] = {}
    dying: dict[str, int] = {}
    other: dict[str, int] = {}
    for key, value in values.items():
        if key in ("nr_descendants", "nr_dying_descendants"):
            continue
        if key.startswith("nr_dying_subsys_"):
            dying[key.removeprefix("nr_dying_subsys_")] = value
        elif key.startswith("nr_subsys_"):
            subsys[key.removeprefix("nr_subsys_")] = value
        else:
            other[key] = value
    return CgroupStat(values["nr_descendants"], values["nr_dying_descendants"], subsys, dying, other)


def _is_count(text: str) -> bool:
    """ASCII digits of a kernel counter (``int()`` would also take ``٣``, ``+3``, ``1_000``): what a
    recorded sample from a bundle holds is not trusted to be the kernel's."""
    return text.isascii() and text.isdigit() and len(text) <= 19


@dataclass(frozen=True)
class ProcCgroupsRow:
    """One row of ``/proc/cgroups``: a controller, its v1 hierarchy id (0: v2 or unmounted), counts."""

    subsys_name: str
    hierarchy: int
    num_cgroups: int
    enabled: bool


def parse_proc_cgroups(text: str, *, where: str = "/proc/cgroups") -> dict[str, ProcCgroupsRow]:
    """Parse ``/proc/cgroups``. The header line starts with ``#``; columns are tab-separated."""
    rows: dict[str, ProcCgroupsRow] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 4:
            raise CgroupReadError(f"line {lineno}: expected 4 columns, got {line!r}", where=where)
        if not (_is_count(parts[1]) and _is_count(parts[2])):
            raise CgroupReadError(f"line {lineno}: non-integer column in {line[:200]!r}", where=where)
        rows[parts[0]] = ProcCgroupsRow(parts[0], int(parts[1]), int(parts[2]), parts[3] == "1")
    return rows


# --------------------------------------------------------------------------------------------------
# Layout


@dataclass(frozen=True)
class CgroupLayout:
    """Which cgroup hierarchies are mounted under the cgroup root, and which one holds memory."""

    kind: Layout
    memory: Hierarchy | None  # None: no usable memory controller
    v1_memory_path: Path | None
    v2_path: Path | None
    v2_controllers: tuple[str, ...] = ()
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "layout": self.kind,
            "memory_hierarchy": self.memory,
            "v1_memory_path": str(self.v1_memory_path) if self.v1_memory_path else None,
            "v2_path": str(self.v2_path) if self.v2_path else None,
            "v2_controllers": list(self.v2_controllers),
            "note": self.note,
        }


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
    """Find the v2 root (``cgroup_root`` itself or ``cgroup_root/unified``) and the v1 memory mount.

    The memory controller is on v1 when ``/proc/cgroups`` gives it a non-zero hierarchy id and the
    v1 memory directory is there; on v2 when the v2 root lists it in ``cgroup.controllers``.
    """
    proc = Path(proc_root)
    root = Path(cgroup_root)
    rows = parse_proc_cgroups(_read_text(proc / "cgroups"), where=str(proc / "cgroups"))
    mem_row = rows.get("memory")

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

    if v2_path is not None and v2_path == root:
        kind: Layout = "v2"
    elif v1_memory_path is not None or any((root / name).is_dir() for name in rows):
        kind = "hybrid" if v2_path is not None else "v1"
    else:
        kind = "v2" if v2_path is not None else "none"

    memory: Hierarchy | None = None
    note: str | None = None
    if mem_row is None or not mem_row.enabled:
        note = "the kernel has no enabled memory controller (/proc/cgroups)"
    elif mem_row.hierarchy != 0 and v1_memory_path is not None:
        memory = "v1"
    elif mem_row.hierarchy == 0 and "memory" in v2_controllers:
        memory = "v2"
    elif mem_row.hierarchy != 0:
        note = f"memory is on v1 hierarchy {mem_row.hierarchy} but not mounted at {root / 'memory'}"
    else:
        note = "the memory controller is not mounted on any hierarchy under " + str(root)
    return CgroupLayout(kind, memory, v1_memory_path, v2_path, v2_controllers, note)


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


@dataclass(frozen=True)
class SubtreeCount:
    """Counts for one subtree (``system.slice``, ``system.slice/ecs.service``...).

    On v2, from its ``cgroup.stat`` (``live`` counts the subtree's own cgroup too); on v1, live
    directories only: v1 has no per-subtree dying count.
    """

    path: str
    hierarchy: Hierarchy
    live: int
    dying: int | None
    dying_memory: int | None = None
    live_memory: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "hierarchy": self.hierarchy,
            "live": self.live,
            "dying": self.dying,
            "live_memory": self.live_memory,
            "dying_memory": self.dying_memory,
        }


@dataclass(frozen=True)
class Sample:
    """One measurement of the memory-cgroup population.

    ``live`` and ``dying`` are memory cgroups, root included in ``live``; both are None when the
    host has no usable memory controller (``layout.note`` says why). ``dying_source`` names the
    counter used; ``num_cgroups`` is the raw v1 ``/proc/cgroups`` figure. ``v2_root`` is the v2
    root ``cgroup.stat`` when a v2 hierarchy is mounted (on a hybrid, it does not count memory).
    """

    monotonic: float
    wall: float
    layout: CgroupLayout
    live: int | None
    dying: int | None
    dying_source: DyingSource | None
    num_cgroups: int | None = None
    v2_root: CgroupStat | None = None
    subtrees: tuple[SubtreeCount, ...] = ()
    subtrees_truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "monotonic": self.monotonic,
            "wall": self.wall,
            "layout": self.layout.kind,
            "memory_hierarchy": self.layout.memory,
            "live": self.live,
            "dying": self.dying,
            "dying_source": self.dying_source,
            "num_cgroups": self.num_cgroups,
            "v2_root": self.v2_root.to_dict() if self.v2_root else None,
            "subtrees": [s.to_dict() for s in self.subtrees],
            "subtrees_truncated": self.subtrees_truncated,
        }


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
            out.append(_v2_subtree(name, stat))
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
                out.append(_v2_subtree(f"{name1}/{name2}", stat))
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


def sample_from_counts(
    mono: float,
    wall: float,
    layout: CgroupLayout,
    v2_root: CgroupStat | None,
    subtrees: tuple[SubtreeCount, ...] = (),
    truncated: bool = False,
    *,
    proc_cgroups: tuple[str, str] | None = None,
    v1_dirs: int | None = None,
) -> Sample:
    """A :class:`Sample` from what was read: on v1, ``/proc/cgroups`` (text, where) and the live
    directory count; on v2, the root ``cgroup.stat``. Shared by the sampler and recorded bundles."""
    if layout.memory == "v1":
        if proc_cgroups is None or v1_dirs is None:
            raise CgroupReadError("no /proc/cgroups or memory directory count", where="memory cgroups")
        row = parse_proc_cgroups(proc_cgroups[0], where=proc_cgroups[1]).get("memory")
        if row is None:
            raise CgroupReadError("the memory row disappeared", where=proc_cgroups[1])
        # The two reads are not atomic: a cgroup made between them can make this -1 for a moment.
        dying = max(0, row.num_cgroups - v1_dirs)
        return Sample(
            mono,
            wall,
            layout,
            v1_dirs,
            dying,
            "proc_cgroups_minus_dirs",
            row.num_cgroups,
            v2_root,
            subtrees,
            truncated,
        )
    if layout.memory == "v2":
        if v2_root is None:
            raise CgroupReadError("no root cgroup.stat", where=str(layout.v2_path))
        if v2_root.has_memory_counts:
            live, dying = v2_root.subsys["memory"], v2_root.dying_subsys["memory"]
            source: DyingSource = "nr_dying_subsys_memory"
        else:
            live, dying = v2_root.nr_descendants + 1, v2_root.nr_dying_descendants
            source = "nr_dying_descendants"
        return Sample(mono, wall, layout, live, dying, source, None, v2_root, subtrees, truncated)
    return Sample(mono, wall, layout, None, None, None, None, v2_root, subtrees, truncated)


def v2_subtree(path: str, stat: CgroupStat) -> SubtreeCount:
    """A v2 subtree's counts from its ``cgroup.stat``."""
    return _v2_subtree(path, stat)


def _v2_subtree(path: str, stat: CgroupStat) -> SubtreeCount:
    return SubtreeCount(
        path,
        "v2",
        stat.nr_descendants + 1,
        stat.nr_dying_descendants,
        dying_memory=stat.dying_subsys.get("memory"),
        live_memory=stat.subsys.get("memory"),
    )


# --------------------------------------------------------------------------------------------------
# Symptom probe


@dataclass(frozen=True)
class ProbeResult:
    """One read of ``memory.stat`` in every live memory cgroup: how many, how long, how much CPU."""

    hierarchy: Hierarchy | None
    cgroups: int
    seconds: float
    cpu_seconds: float
    bytes_read: int
    errors: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "hierarchy": self.hierarchy,
            "cgroups": self.cgroups,
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "bytes_read": self.bytes_read,
            "errors": self.errors,
        }


def _thread_cpu() -> float:
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
    cpu0, t0 = _thread_cpu(), time.perf_counter()
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
    seconds, cpu = time.perf_counter() - t0, _thread_cpu() - cpu0
    return ProbeResult(layout.memory, len(dirs) - errors, seconds, cpu, total, errors)
