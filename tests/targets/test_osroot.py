"""The marks of an OS root (imagelint/targets/osroot.py): each resolved inside the image, each missing
one named; a real debootstrapped Debian tree has all three."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagelint.errors import TargetError
from imagelint.targets.osroot import missing_marks, require_os_root
from imagelint.targets.rootfs import RootfsTarget
from tests.support import build_tree, half_extracted_root


def _missing(root: Path) -> list[str]:
    return [m.name for m in missing_marks(RootfsTarget(root))]


def test_a_real_debian_tree_is_an_os_root(debian_rootfs: Path) -> None:
    assert _missing(debian_rootfs) == []
    require_os_root(RootfsTarget(debian_rootfs), str(debian_rootfs))


def test_an_empty_directory_lacks_every_mark_and_the_line_names_each(tmp_path: Path) -> None:
    assert _missing(tmp_path) == ["os-release", "usr tree", "init"]
    with pytest.raises(TargetError) as raised:
        require_os_root(RootfsTarget(tmp_path), str(tmp_path))
    line = str(raised.value)
    assert line.startswith(f"{tmp_path}: not an operating system's root")
    for named in ("/etc/os-release", "/usr/lib/os-release", "/usr", "/sbin/init", "/usr/lib/systemd/systemd"):
        assert named in line
    assert "--allow-partial-root" in line and "\n" not in line
    assert raised.value.exit_code == 3


def test_a_docs_folder_is_not_an_os_root(tmp_path: Path) -> None:
    build_tree(tmp_path, {"/README.md": "# docs\n", "/guide/index.md": "hello\n", "/etc/notes.txt": "x\n"})
    assert _missing(tmp_path) == ["os-release", "usr tree", "init"]


def test_a_half_extracted_tree_lacks_the_init_its_links_point_to(tmp_path: Path) -> None:
    """A usr-merged tarball cut short: the links are there, what they name is not."""
    half_extracted_root(tmp_path)
    assert _missing(tmp_path) == ["init"]


def test_marks_reached_through_absolute_links_resolve_inside_the_image(tmp_path: Path) -> None:
    """/etc/os-release → ../usr/lib/os-release and /sbin/init → /lib/systemd/systemd with /lib →
    usr/lib, as Debian lays them out: resolved in the image, never on this host."""
    build_tree(
        tmp_path,
        {
            "/usr/lib/os-release": "ID=debian\n",
            "/etc/os-release": {"link": "../usr/lib/os-release"},
            "/usr/lib/systemd/systemd": "",
            "/lib": {"link": "usr/lib"},
            "/sbin": {"link": "usr/sbin"},
            "/usr/sbin/init": {"link": "/lib/systemd/systemd"},
        },
    )
    assert _missing(tmp_path) == []


def test_marks_of_the_wrong_kind_or_escaping_the_image_do_not_count(tmp_path: Path) -> None:
    """A directory named os-release, a /usr that is a file, an init link that climbs out to this host's."""
    build_tree(
        tmp_path,
        {
            "/etc/os-release": {"directory": True},
            "/usr": "not a directory\n",
            "/sbin/init": {"link": "../../../../../../../../usr/lib/systemd/systemd"},
        },
    )
    assert _missing(tmp_path) == ["os-release", "usr tree", "init"]
