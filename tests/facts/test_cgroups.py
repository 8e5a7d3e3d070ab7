"""The cgroup parsers on recorded files (data/cgroup/README.md beside this file) and malformed ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagelint.facts.cgroups import CgroupReadError, decide_layout, parse_cgroup_stat, parse_proc_cgroups

DATA = Path(__file__).resolve().parent / "data" / "cgroup"


def test_v2_every_key_printed_in_the_6_18_order() -> None:
    stat = parse_cgroup_stat((DATA / "v2-6.18-order/sys/fs/cgroup/cgroup.stat").read_text())
    assert stat.has_memory_counts
    assert stat.subsys["memory"] == stat.nr_descendants + 1  # nr_subsys counts the cgroup itself
    assert stat.dying_subsys["memory"] == stat.nr_dying_descendants
    assert set(stat.subsys) == set(stat.dying_subsys)


def test_malformed_files_are_read_errors() -> None:
    with pytest.raises(CgroupReadError):
        parse_cgroup_stat("nr_descendants 3\n")
    with pytest.raises(CgroupReadError):
        parse_cgroup_stat("nr_descendants x\nnr_dying_descendants 1\n")
    with pytest.raises(CgroupReadError):
        parse_proc_cgroups("#subsys_name\thierarchy\tnum_cgroups\tenabled\nmemory\t4\t12\n")


def test_the_layout_is_decided_from_what_was_found() -> None:
    rows = parse_proc_cgroups((DATA / "hybrid-6.18/proc/cgroups").read_text())
    root = Path("/sys/fs/cgroup")
    memory = root / "memory"
    found = {"memory", "unified"}.__contains__
    hybrid = decide_layout(rows, root, root / "unified", ("hugetlb",), memory, found)
    assert (hybrid.kind, hybrid.memory, hybrid.v1_memory_path, hybrid.note) == ("hybrid", "v1", memory, None)
    unmounted = decide_layout(rows, root, None, (), None, lambda name: False)
    assert (unmounted.kind, unmounted.memory) == ("none", None)
    assert unmounted.note == f"memory is on v1 hierarchy 4 but not mounted at {memory}"
