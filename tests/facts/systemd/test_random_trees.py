"""Differential test on seeded random trees (see random_trees.py): systemctl must agree on all."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagelint.facts.systemd import UnitIndex
from imagelint.targets.rootfs import RootfsTarget
from tests.facts.systemd.oracle import compare, systemctl_available
from tests.facts.systemd.random_trees import random_tree
from tests.support import is_root, need

SEEDS = range(40)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_tree_matches_systemctl(tmp_path: Path, seed: int) -> None:
    need(systemctl_available(), "systemctl (the oracle) is not installed")
    need(is_root(), "the random trees contain a /dev/null device node, which needs root to create")
    root = random_tree(tmp_path / "root", seed)
    index = UnitIndex.build(RootfsTarget(root))
    result = compare(root, index)
    assert result.mismatches == [], "\n".join(result.mismatches)
