"""The mounted-image target stays bounded and leaves no trace on deep, wide or hostile trees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from imagelint.errors import ImageReadError
from imagelint.targets import RootfsTarget
from imagelint.targets import resolver as rootfs_module


def _deep_tree(root: Path, depth: int) -> Path:
    """``root/d/d/.../d/leaf.conf`` ``depth`` levels down, built through a descriptor (PATH_MAX-safe)."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        leaf = os.open("leaf.conf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.close(leaf)
    finally:
        os.close(fd)
    return root


def test_a_double_star_glob_finds_a_file_600_levels_down(tmp_path: Path) -> None:
    """Used to resolve every level from the root and recurse once per level (RecursionError, 46 s)."""
    root = _deep_tree(tmp_path / "img", 600)
    (match,) = RootfsTarget(root).glob("/**/leaf.conf")
    assert match == "/" + "d/" * 600 + "leaf.conf"


def test_a_walk_reaches_600_levels_and_stops_past_the_depth_budget(tmp_path: Path, monkeypatch) -> None:
    root = _deep_tree(tmp_path / "img", 600)
    assert sum(1 for st in RootfsTarget(root).walk("/") if st.path.endswith("leaf.conf")) == 1
    monkeypatch.setattr(rootfs_module, "MAX_WALK_DEPTH", 100)
    with pytest.raises(ImageReadError, match="more than 100 directory levels"):
        list(RootfsTarget(root).walk("/"))
    with pytest.raises(ImageReadError, match="more than 100 directory levels"):
        RootfsTarget(root).glob("/**/leaf.conf")


def test_a_tree_wider_than_the_entry_budget_is_an_error_not_a_partial_answer(
    tmp_path: Path, monkeypatch
) -> None:
    root = tmp_path / "img"
    (root / "etc").mkdir(parents=True)
    for i in range(50):
        (root / "etc" / f"f{i}").touch()
    monkeypatch.setattr(rootfs_module, "MAX_WALK_ENTRIES", 20)
    with pytest.raises(ImageReadError, match="more than 20 entries"):
        RootfsTarget(root).glob("/etc/*")
    with pytest.raises(ImageReadError, match="more than 20 entries"):
        list(RootfsTarget(root).walk("/etc"))


def test_globbing_and_listing_leave_directory_access_times_as_they_were(tmp_path: Path) -> None:
    root = tmp_path / "img"
    (root / "etc" / "ssh").mkdir(parents=True)
    (root / "etc" / "ssh" / "sshd_config").write_text("PermitRootLogin no\n")
    dirs = [root, root / "etc", root / "etc" / "ssh"]
    for d in dirs:
        os.utime(d, (1_000_000_000, 1_000_000_000))  # older than mtime: relatime would update it
    before = [os.stat(d).st_atime_ns for d in dirs]
    target = RootfsTarget(root)
    target.glob("/**/sshd_config")
    target.listdir("/etc/ssh")
    list(target.walk("/"))
    assert [os.stat(d).st_atime_ns for d in dirs] == before


def test_resolution_through_cached_prefixes_still_follows_links_inside_the_image(tmp_path: Path) -> None:
    root = tmp_path / "img"
    (root / "usr" / "lib" / "systemd" / "system").mkdir(parents=True)
    (root / "usr" / "lib" / "systemd" / "system" / "a.service").touch()
    (root / "lib").symlink_to("usr/lib")
    (root / "loop").symlink_to("/loop")
    target = RootfsTarget(root)
    assert target.glob("/lib/systemd/system/*.service") == ["/lib/systemd/system/a.service"]
    assert target.resolve("/lib/systemd/system/a.service") == "/usr/lib/systemd/system/a.service"
    assert target.resolve("/lib/systemd/../../etc") == "/usr/etc"  # after the link, .. climbs from usr/lib
    with pytest.raises(ImageReadError, match="symlink loop"):
        target.resolve("/loop/x")


def test_a_directory_wider_than_a_listing_holds_is_an_error_in_memory_bounded_by_the_limit(
    tmp_path: Path, monkeypatch
) -> None:
    """A listing was held whole (and sorted) whatever its size: 1M entries cost ~1 GB. Now what is
    held is bounded by MAX_DIR_ENTRIES, not by the directory (here 1,000 against 30,000 entries)."""
    import tracemalloc

    root = tmp_path / "img"
    wide = root / "etc" / "wide"
    wide.mkdir(parents=True)
    fd = os.open(wide, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(30_000):
            os.close(os.open(f"f{i}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    monkeypatch.setattr(rootfs_module, "MAX_DIR_ENTRIES", 1000)
    target = RootfsTarget(root)
    tracemalloc.start()
    try:
        with pytest.raises(ImageReadError, match="more than 1,000 entries in one directory") as caught:
            list(target.walk("/etc"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.path == "/etc/wide"
    assert peak < 2 * 1024 * 1024  # 30,000 listed entries take ~8 MiB
