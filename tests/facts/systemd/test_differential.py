"""Enablement state and preset of every unit file, against real ``systemctl --root`` (systemd 252).

Agreement must be total. The only deliberate difference is documented where it is expected:

* a unit file over the target's read cap (16 MiB; the 40 MB file of ``bad_tree``) is never read by
  imagelint, so its ``[Install]`` section is unknown and its state is ``bad`` (with a problem
  recorded). systemctl reads it whole and reports what its ``[Install]`` section says.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from imagelint.facts.systemd import UnitIndex
from imagelint.targets.rootfs import RootfsTarget
from tests.facts.systemd import crafted
from tests.facts.systemd.oracle import (
    NO_PRESET_STATES,
    SYSTEMCTL,
    compare,
    list_unit_files,
    systemctl_available,
)
from tests.support import copy_rootfs, need


@pytest.fixture(autouse=True)
def _systemctl() -> None:
    need(systemctl_available(), "systemctl (the oracle) is not installed")


def _check(root: Path, **kwargs: dict[str, tuple[str, str]]) -> UnitIndex:
    index = UnitIndex.build(RootfsTarget(root))
    result = compare(root, index, **kwargs)
    assert result.compared_list > 0
    assert result.mismatches == [], "\n".join(result.mismatches)
    print(f"{root.name}: {result.compared_list} unit files, {result.compared_is_enabled} names; 0 mismatches")
    return index


def test_debian_image_matches_systemctl(debian_rootfs: Path) -> None:
    index = _check(debian_rootfs)
    states = {u.state for u in index}
    # the real image exercises at least these states; if it stops doing so, the test says so
    assert {"enabled", "disabled", "static", "alias", "masked"} <= states
    assert len(list_unit_files(debian_rootfs)) >= 150


@pytest.mark.slow
def test_modified_debian_image_matches_systemctl(debian_rootfs: Path, tmp_path: Path) -> None:
    """The real image after the kind of changes an image build makes, each made by systemctl."""
    root = copy_rootfs(debian_rootfs, tmp_path / "image")
    steps = [
        ["disable", "cron.service"],
        ["enable", "systemd-networkd.service"],
        ["mask", "e2scrub_reap.service"],
        ["enable", "serial-getty@ttyS0.service"],
        ["enable", "--runtime", "systemd-sysext.service"],
        ["mask", "--runtime", "apt-daily.timer"],
        ["set-default", "multi-user.target"],
        ["disable", "systemd-pstore.service"],
        ["preset", "systemd-pstore.service", "ssh.socket"],
    ]
    for step in steps:
        subprocess.run([SYSTEMCTL, f"--root={root}", "--no-pager", *step], check=True, capture_output=True)
    index = _check(root)
    assert index["cron.service"].state == "disabled"
    assert index["serial-getty@ttyS0.service"].state == "enabled"
    assert index.default_target == "multi-user.target"


def test_enablement_states(tmp_path: Path) -> None:
    index = _check(crafted.enablement_tree(tmp_path / "root"))
    expected_states = {
        "enabled",
        "enabled-runtime",
        "linked",
        "linked-runtime",
        "alias",
        "masked",
        "masked-runtime",
        "static",
        "indirect",
        "disabled",
        "generated",
        "transient",
    }
    assert expected_states <= {u.state for u in index}, "the crafted tree no longer covers every state"


def test_syntax_in_install_sections(tmp_path: Path) -> None:
    _check(crafted.syntax_tree(tmp_path / "root"))


def test_split_usr_image(tmp_path: Path) -> None:
    _check(crafted.split_usr_tree(tmp_path / "root"))


def test_presets(tmp_path: Path) -> None:
    index = _check(crafted.preset_tree(tmp_path / "root"))
    assert {u.preset for u in index} == {"enabled", "disabled", "-"}
    assert all(u.state in NO_PRESET_STATES for u in index if u.preset == "-")  # as systemctl prints


def test_bad_input(tmp_path: Path) -> None:
    index = _check(
        crafted.bad_tree(tmp_path / "root"), expected_differences={"big.service": ("disabled", "bad")}
    )
    assert index["ok.service"].state == "enabled"
