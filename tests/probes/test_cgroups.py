"""The layout probe, the sampler and the walk on recorded and documented cgroup trees (the parsers'
test data, tests/facts/data/cgroup: its README.md says which), and on this machine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from imagelint.facts.cgroups import CgroupReadError
from imagelint.probes.cgroups import CgroupSampler, count_memory_dirs, detect_layout, probe_memory_stat

DATA = Path(__file__).resolve().parents[1] / "facts" / "data" / "cgroup"


def sampler(tree: str, root: Path = DATA, **kw: int) -> CgroupSampler:
    return CgroupSampler(proc_root=root / tree / "proc", cgroup_root=root / tree / "sys/fs/cgroup", **kw)


def test_this_machines_hybrid_layout_recorded() -> None:
    s = sampler("hybrid-6.18")
    assert s.layout.kind == "hybrid"
    assert s.layout.memory == "v1"
    assert s.layout.v2_controllers == ("hugetlb",)
    sample = s.sample()
    # 10 directories in the v1 memory tree (the symlink is not one); /proc/cgroups says 27
    assert (sample.live, sample.dying, sample.num_cgroups) == (10, 17, 27)
    assert sample.dying_source == "proc_cgroups_minus_dirs"
    # the unified hierarchy's own cgroup.stat, recorded on 6.18: per-controller keys, no memory
    assert sample.v2_root is not None
    assert sample.v2_root.subsys == {"perf_event": 1, "hugetlb": 1}
    assert "memory" not in sample.v2_root.dying_subsys
    subtrees = {t.path: t for t in sample.subtrees}
    assert subtrees["process_api"].live == 5 and subtrees["process_api"].dying is None
    assert subtrees["system.slice"].live == 4
    assert subtrees["system.slice/docker.service"].live == 2  # has a child: listed
    assert "system.slice/sshd.service" not in subtrees  # a leaf at level 2: not listed
    assert "link-to-process_api" not in subtrees
    json.dumps(sample.to_dict())  # serialisable as is


def test_live_host_layout_matches_mounts() -> None:
    """On the machine itself: the layout agrees with /proc/self/mounts."""
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    v1_memory = any(m.split()[2] == "cgroup" and "memory" in m.split()[3].split(",") for m in mounts)
    v2_dirs = [m.split()[1] for m in mounts if m.split()[2] == "cgroup2"]
    layout = detect_layout()
    if v1_memory:
        assert layout.memory == "v1"
        assert layout.kind == ("hybrid" if v2_dirs else "v1")
    elif "/sys/fs/cgroup" in v2_dirs:
        assert layout.kind == "v2"
    if v2_dirs:
        assert str(layout.v2_path) in v2_dirs


def test_v2_with_per_controller_keys_uses_the_memory_counters() -> None:
    s = sampler("v2-subsys")
    assert (s.layout.kind, s.layout.memory) == ("v2", "v2")
    sample = s.sample()
    assert sample.dying_source == "nr_dying_subsys_memory"
    assert (sample.live, sample.dying) == (55, 35)
    subtrees = {t.path: t for t in sample.subtrees}
    assert set(subtrees) == {
        "init.scope",
        "system.slice",
        "user.slice",
        # second level only below subtrees with dying descendants
        "system.slice/ecs.service",
        "system.slice/sshd.service",
    }
    assert subtrees["system.slice"].dying_memory == 33
    assert subtrees["system.slice/ecs.service"].dying_memory == 30
    assert subtrees["system.slice/sshd.service"].dying_memory is None  # key absent in that revision
    # growth is localised: the unit holds most of its slice's dying memcgs
    worst = max((t for t in sample.subtrees if "/" in t.path), key=lambda t: t.dying or 0)
    assert worst.path == "system.slice/ecs.service"


def test_v2_every_key_printed_in_the_6_18_order_counts_memory() -> None:
    sample = sampler("v2-6.18-order").sample()
    assert (sample.live, sample.dying) == (56, 35)


def test_v2_before_per_controller_keys_falls_back_to_all_descendants() -> None:
    sample = sampler("v2-legacy").sample()
    assert sample.dying_source == "nr_dying_descendants"
    assert (sample.live, sample.dying) == (42, 212)
    subtrees = {t.path: t for t in sample.subtrees}
    assert subtrees["system.slice/ecs.service"].dying == 209
    assert subtrees["system.slice/ecs.service"].dying_memory is None


def test_v1_only_and_no_memory_controller() -> None:
    v1 = sampler("v1-only")
    assert (v1.layout.kind, v1.layout.memory, v1.layout.v2_path) == ("v1", "v1", None)
    sample = v1.sample()
    assert (sample.live, sample.dying) == (4, 236)

    none = sampler("no-memory")
    assert none.layout.memory is None and "no enabled memory controller" in (none.layout.note or "")
    sample = none.sample()
    assert sample.live is None and sample.dying is None and sample.dying_source is None
    assert probe_memory_stat(none.layout).cgroups == 0


def test_subtree_budget_truncates(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    shutil.copytree(DATA / "v2-subsys", tree, symlinks=True)
    sample = CgroupSampler(tree / "proc", tree / "sys/fs/cgroup", max_subtrees=2).sample()
    assert len(sample.subtrees) == 2 and sample.subtrees_truncated
    shallow = CgroupSampler(tree / "proc", tree / "sys/fs/cgroup", subtree_depth=1).sample()
    assert all("/" not in t.path for t in shallow.subtrees)


def test_walk_counts_nested_directories_and_never_follows_symlinks(tmp_path: Path) -> None:
    """Leaves (st_nlink 2) are not listed; a symlink to the root would loop if it were followed."""
    root = tmp_path / "memory"
    for p in ("a/b/c", "a/d", "e"):
        (root / p).mkdir(parents=True)
    (root / "a" / "loop").symlink_to(root)  # never followed
    total, per = count_memory_dirs(root)
    assert total == 6 and per == {"a": 4, "e": 1, "a/b": 2}


def test_an_unreadable_proc_cgroups_is_a_read_error() -> None:
    with pytest.raises(CgroupReadError) as err:
        CgroupSampler(proc_root="/nonexistent", cgroup_root=DATA / "hybrid-6.18/sys/fs/cgroup")
    assert err.value.exit_code == 3
