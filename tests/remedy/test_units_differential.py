"""imagelint's disable and mask against the real ``systemctl --root=DIR disable|mask`` on copies of the
same trees (seeded random tangles, the crafted enablement cases, the real Debian image): the resulting
trees must be identical, entry for entry (paths, link targets, file contents)."""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
from pathlib import Path

import pytest

from imagelint.remedy.rootdir import RootDir
from imagelint.remedy.units import UnitFixError, disable, mask
from tests.facts.systemd.crafted import enablement_tree, link, skeleton, unit, write
from tests.facts.systemd.oracle import SYSTEMCTL, systemctl_available
from tests.facts.systemd.random_trees import NAMES, random_tree
from tests.remedy.trees import differences, listing
from tests.support import is_root, need

SEEDS = range(40)
OPERATIONS = {"disable": disable, "mask": mask}


def _both(tree: Path, work: Path, verb: str, units: list[str]) -> list[str]:
    """The differences between systemctl's result and ours on two copies of ``tree``."""
    theirs, ours = work / "theirs", work / "ours"
    for copy in (theirs, ours):
        subprocess.run(["cp", "-a", str(tree), str(copy)], check=True)
    env = {**os.environ, "SYSTEMCTL_SKIP_SYSV": "1"}
    subprocess.run(
        [SYSTEMCTL, f"--root={theirs}", "--no-pager", verb, "--", *units],
        capture_output=True,
        env=env,
        check=False,
    )
    with contextlib.suppress(UnitFixError):  # systemctl fails there too: neither may change more
        OPERATIONS[verb](RootDir(ours), units)
    return differences(listing(theirs), listing(ours))


@pytest.mark.parametrize("seed", SEEDS)
def test_random_trees(tmp_path: Path, seed: int) -> None:
    need(systemctl_available(), "systemctl (the oracle) is not installed")
    need(is_root(), "the random trees contain a /dev/null device node, which needs root to create")
    tree = random_tree(tmp_path / "tree", seed)
    r = random.Random(seed)
    for i, verb in enumerate(("disable", "disable", "mask")):
        units = r.sample(NAMES, k=r.randint(1, 3))
        work = tmp_path / f"run{i}"
        work.mkdir()
        assert _both(tree, work, verb, units) == [], f"{verb} {units}"


def _chains(root: Path) -> Path:
    """Aliases, Also=, DefaultInstance=, RequiredBy= and links that lead through other links."""
    skeleton(root)
    write(
        root,
        "usr/lib/systemd/system/a.service",
        unit("a", "WantedBy=multi-user.target\nAlias=aa.service\nAlso=b.service"),
    )
    write(root, "usr/lib/systemd/system/b.service", unit("b", "RequiredBy=graphical.target"))
    write(
        root,
        "usr/lib/systemd/system/t@.service",
        unit("t", "WantedBy=multi-user.target\nDefaultInstance=one"),
    )
    write(root, "usr/lib/systemd/system/d.service", unit("d", "WantedBy=multi-user.target"))
    write(root, "etc/systemd/system/d.service.d/10-x.conf", "[Install]\nWantedBy=graphical.target\n")
    for args in (
        ("enable", "a.service"),
        ("enable", "t@.service"),
        ("enable", "t@two.service"),
        ("enable", "d.service"),
    ):
        subprocess.run([SYSTEMCTL, f"--root={root}", *args], check=True, capture_output=True)
    link(root, "etc/systemd/system/bar.service", "/usr/lib/systemd/system/d.service")
    link(root, "etc/systemd/system/x.target.wants/x.service", "/etc/systemd/system/bar.service")
    link(root, "etc/systemd/system/deep/er.wants/d.service", "/usr/lib/systemd/system/d.service")
    return root


@pytest.mark.parametrize(
    "units",
    [
        ["a.service"],
        ["aa.service"],
        ["b.service"],
        ["t@.service"],
        ["t@two.service"],
        ["d.service"],
        ["bar.service"],
        ["missing.service"],
        ["a.service", "d.service", "t@one.service"],
    ],
)
@pytest.mark.parametrize("verb", ["disable", "mask"])
def test_crafted_chains(tmp_path: Path, verb: str, units: list[str]) -> None:
    need(systemctl_available(), "systemctl (the oracle) is not installed")
    tree = _chains(tmp_path / "tree")
    assert _both(tree, tmp_path, verb, units) == []


def test_enablement_cases(tmp_path: Path) -> None:
    need(systemctl_available(), "systemctl (the oracle) is not installed")
    tree = enablement_tree(tmp_path / "tree")
    names = sorted({p.name for p in (tree / "usr/lib/systemd/system").iterdir() if "." in p.name})
    for i, name in enumerate(names):
        work = tmp_path / f"run{i}"
        work.mkdir()
        assert _both(tree, work, "disable", [name]) == [], name


def test_debian_image(debian_rootfs: Path, tmp_path: Path) -> None:
    """The real image's unit trees (etc and the vendor units; the rest of the image plays no part)."""
    need(systemctl_available(), "systemctl (the oracle) is not installed")
    tree = tmp_path / "tree"
    (tree / "usr/lib").mkdir(parents=True)
    subprocess.run(["cp", "-a", str(debian_rootfs / "etc"), str(tree / "etc")], check=True)
    subprocess.run(
        ["cp", "-a", str(debian_rootfs / "usr/lib/systemd"), str(tree / "usr/lib/systemd")], check=True
    )
    for name in ("lib", "bin", "sbin"):
        if (debian_rootfs / name).is_symlink():
            os.symlink(os.readlink(debian_rootfs / name), tree / name)
    for i, units in enumerate(
        (
            ["ssh.service"],
            ["cron.service"],
            ["getty@.service"],
            ["sshd.service"],
            ["systemd-timesyncd.service", "remote-fs.target"],
        )
    ):
        for verb in ("disable", "mask"):
            work = tmp_path / f"{verb}{i}"
            work.mkdir()
            assert _both(tree, work, verb, units) == [], f"{verb} {units}"
