"""Memory-cgroup counts: live and dying ("zombie") memcgs, on cgroup v1, v2 and hybrids, from what was read.

A memory cgroup that was removed (``rmdir``) while page cache was still charged to it stays
allocated in the kernel as a *dying* cgroup until those pages go. Thousands of them make every walk
over the memory hierarchy (kubelet, cAdvisor, reclaim) slow. This module parses what the cgroup
files say and makes samples of it; :mod:`imagelint.probes.cgroups` reads them on the running host,
:mod:`imagelint.bundle.probes` from a collected bundle:

- **cgroup v2** (memory controller on the unified hierarchy): the root ``cgroup.stat``. Kernels
  since about 6.11 print ``nr_subsys_memory`` (live memory csses at and beneath the cgroup) and
  ``nr_dying_subsys_memory``; older kernels only ``nr_descendants`` / ``nr_dying_descendants``
  (every controller together), which is used as the fallback. Each sample says which it used.
  ``cgroup.stat`` of the subtrees one and two levels down localises growth to a slice or a unit.
- **cgroup v1** (memory controller on its own hierarchy, as in the incident): the ``memory`` row of
  ``/proc/cgroups`` counts live *and* dying memcgs; the directories under the memory mount are the
  live ones. dying = num_cgroups − directories.
- **hybrid** (systemd's layout with a v1 memory controller beside a v2 ``unified`` hierarchy that
  has no memory controller, as on the machines this was written on): the memory count comes from
  v1; the unified hierarchy's ``cgroup.stat`` is reported beside it.

:class:`ProbeResult` is what the *symptom probe* (:func:`imagelint.probes.cgroups.probe_memory_stat`)
measured: a read of ``memory.stat`` in every live memory cgroup, as kubelet and cAdvisor do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import Any, Literal

from imagelint.errors import ExitCode, ImageLintError
from imagelint.records import dataclass

Layout = Literal["v1", "v2", "hybrid", "none"]
Hierarchy = Literal["v1", "v2"]
DyingSource = Literal["nr_dying_subsys_memory", "nr_dying_descendants", "proc_cgroups_minus_dirs"]


class CgroupReadError(ImageLintError):
    """A cgroup file that should be there could not be read or parsed: the sample is inconclusive."""

    exit_code = ExitCode.INCONCLUSIVE


# --------------------------------------------------------------------------------------------------
# Parsers


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
    memory_enabled: bool = True  # the kernel has an enabled memory controller (mounted or not)

    def to_dict(self) -> dict[str, Any]:
        return {
            "layout": self.kind,
            "memory_hierarchy": self.memory,
            "v1_memory_path": str(self.v1_memory_path) if self.v1_memory_path else None,
            "v2_path": str(self.v2_path) if self.v2_path else None,
            "v2_controllers": list(self.v2_controllers),
            "note": self.note,
        }


def decide_layout(
    rows: dict[str, ProcCgroupsRow],
    root: Path,
    v2_path: Path | None,
    v2_controllers: tuple[str, ...],
    v1_memory_path: Path | None,
    has_v1_dir: Callable[[str], bool],
) -> CgroupLayout:
    """The layout, from what was found under the cgroup root ``root``: ``/proc/cgroups``, the v2 root
    (``root`` or ``root/unified``, None when there is none) and its controllers, the v1 memory mount,
    and whether a controller has a v1 hierarchy directory under ``root`` (asked only when needed).

    The memory controller is on v1 when ``/proc/cgroups`` gives it a non-zero hierarchy id and the
    v1 memory directory is there; on v2 when the v2 root lists it in ``cgroup.controllers``.
    Shared by the live probe and a bundle's recorded layout.
    """
    mem_row = rows.get("memory")
    if v2_path is not None and v2_path == root:
        kind: Layout = "v2"
    elif v1_memory_path is not None or any(has_v1_dir(name) for name in rows):
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
    enabled = mem_row is not None and mem_row.enabled
    return CgroupLayout(kind, memory, v1_memory_path, v2_path, v2_controllers, note, memory_enabled=enabled)


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
    return SubtreeCount(
        path,
        "v2",
        stat.nr_descendants + 1,
        stat.nr_dying_descendants,
        dying_memory=stat.dying_subsys.get("memory"),
        live_memory=stat.subsys.get("memory"),
    )


# --------------------------------------------------------------------------------------------------
# Symptom probe (what it measured)


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
