"""Bad input: each shape is a recorded problem naming its path, never a traceback, and the rest of
the image is still indexed. (That systemctl agrees on the states of these units is checked in
test_differential.test_bad_input.)"""

from __future__ import annotations

import pytest

from imagelint.facts.systemd import Problem, UnitIndex
from imagelint.targets.rootfs import RootfsTarget
from tests.facts.systemd import crafted
from tests.facts.systemd.oracle import systemctl_available
from tests.support import need


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> UnitIndex:
    need(systemctl_available(), "systemctl (used to build the tree) is not installed")
    root = crafted.bad_tree(tmp_path_factory.mktemp("bad") / "root")
    return UnitIndex.build(RootfsTarget(root))


def _problems(index: UnitIndex, path: str) -> list[Problem]:
    return [p for p in index.problems if p.path == path]


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("/etc/systemd/system/loop.service", "links to itself (a symlink loop)"),
        ("/etc/systemd/system/cycle-a.service", "alias cycle"),
        ("/etc/systemd/system/multi-user.target.wants/ghost.service", "no unit file defines"),
        ("/etc/systemd/system/escape.service", "resolved inside the image to /opt/escape.service"),
        ("/usr/lib/systemd/system/big.service", "over the 16.0 MiB read limit"),
        ("/usr/lib/systemd/system/garbage.service", "not valid UTF-8"),
        ("/usr/lib/systemd/system/dropin-file.service.d", "found a file"),
        ("/opt/gone/dangling-linked.service", "does not exist"),
        ("/usr/lib/systemd/system/data-alias.mount", "not allowed for mount units"),
        ("/etc/systemd/system/self.service", "self-alias"),
    ],
)
def test_each_bad_shape_is_a_problem(index: UnitIndex, path: str, words: str) -> None:
    found = _problems(index, path)
    assert any(words in p.message for p in found), [str(p) for p in index.problems]


def test_bad_units_are_still_indexed_and_the_rest_is_intact(index: UnitIndex) -> None:
    for name in (
        "loop.service",
        "cycle-a.service",
        "garbage.service",
        "big.service",
        "dangling-linked.service",
    ):
        assert index[name].state == "bad", name
    assert index["ok.service"].state == "enabled"
    assert index["ok.service"].boot_chain == [
        "default.target",
        "graphical.target",
        "multi-user.target",
        "ok.service",
    ]
    assert index["escape.service"].state == "linked"
    assert index["escape.service"].fragment == "/opt/escape.service"
    assert index["dropin-file.service"].dropins == ()
    assert index["dropin-file.service"].get_value("Service", "ExecStart") == "/bin/true"
    assert "ghost.service" not in index


def test_problems_serialise(index: UnitIndex) -> None:
    data = index.to_dict()
    assert all(set(p) == {"path", "line", "message"} for p in data["problems"])
    garbage = [p for p in data["problems"] if p["path"].endswith("garbage.service")]
    assert garbage and garbage[0]["line"] is not None
