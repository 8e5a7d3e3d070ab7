"""The mounted-image target never leaves the image root and never opens what it should not."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from imagelint.errors import ImageReadError, TargetError
from imagelint.targets import FileKind, RootfsTarget
from tests.support import alarm_after


@pytest.fixture
def image(tmp_path: Path) -> Path:
    root = tmp_path / "image"
    (root / "etc").mkdir(parents=True)
    (root / "usr/lib/systemd/system").mkdir(parents=True)
    (root / "etc/shadow").write_text("root:*:image:\n")
    (root / "usr/lib/systemd/system/a.service").write_text("[Service]\n")
    os.symlink("usr/lib", root / "lib")  # usr-merged
    return root


def test_absolute_symlink_resolves_inside_the_image(image: Path) -> None:
    os.symlink("/etc/shadow", image / "etc/evil")
    target = RootfsTarget(image)
    assert target.resolve("/etc/evil") == "/etc/shadow"
    assert target.read_text("/etc/evil").text == "root:*:image:\n"  # the image's file, not the host's


def test_dotdot_cannot_climb_out(image: Path) -> None:
    os.symlink("../../../../../../etc/shadow", image / "etc/up")
    target = RootfsTarget(image)
    assert target.resolve("/../../etc/shadow") == "/etc/shadow"
    assert target.read_text("/etc/up").text == "root:*:image:\n"


def test_links_through_usr_merge_resolve(image: Path) -> None:
    os.symlink("/lib/systemd/system/a.service", image / "etc/a.service")
    target = RootfsTarget(image)
    assert target.resolve("/etc/a.service") == "/usr/lib/systemd/system/a.service"
    assert target.stat("/etc/a.service").kind is FileKind.FILE
    assert target.lstat("/etc/a.service").kind is FileKind.SYMLINK


def test_symlink_loop_is_a_clear_error(image: Path) -> None:
    os.symlink("loop-b", image / "etc/loop-a")
    os.symlink("loop-a", image / "etc/loop-b")
    target = RootfsTarget(image)
    with pytest.raises(ImageReadError) as err:
        target.read_bytes("/etc/loop-a")
    assert err.value.path == "/etc/loop-a"
    assert "symlink loop" in str(err.value)


def test_fifo_is_never_opened(image: Path) -> None:
    os.mkfifo(image / "etc/fifo")
    target = RootfsTarget(image)
    # a naive open() would block forever: a hang fails the test instead of holding the suite
    with (
        alarm_after(60, lambda: AssertionError("the FIFO was opened")),
        pytest.raises(ImageReadError, match="is a FIFO, not a regular file"),
    ):
        target.read_bytes("/etc/fifo")


def test_socket_is_refused(image: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(image / "etc/sock"))
    try:
        with pytest.raises(ImageReadError, match="socket"):
            RootfsTarget(image).read_bytes("/etc/sock")
    finally:
        sock.close()


def test_huge_file_is_refused_by_the_cap(image: Path) -> None:
    with open(image / "etc/huge", "wb") as f:
        f.truncate(2 * 1024**3)  # 2 GiB, sparse
    with pytest.raises(ImageReadError, match=r"2\.0 GiB, over the 16\.0 MiB read limit"):
        RootfsTarget(image).read_bytes("/etc/huge")


def test_non_utf8_is_kept_with_the_offset(image: Path) -> None:
    (image / "etc/latin1").write_bytes(b"caf\xe9 ok\n")
    content = RootfsTarget(image).read_text("/etc/latin1")
    assert content.invalid_utf8_at == 3
    assert content.text.encode("utf-8", errors="surrogateescape") == b"caf\xe9 ok\n"


def test_glob_matches_dotfiles_only_when_asked(image: Path) -> None:
    for name in ("a", ".b", "c.conf"):
        (image / "etc" / name).write_text("x")
    target = RootfsTarget(image)
    assert target.glob("/etc/*") == ["/etc/a", "/etc/c.conf", "/etc/shadow"]
    assert target.glob("/etc/.*") == ["/etc/.b"]
    assert target.glob("/**/a.service") == ["/usr/lib/systemd/system/a.service"]


def test_walk_does_not_follow_links(image: Path) -> None:
    os.symlink("/usr", image / "etc/usr-link")
    paths = [st.path for st in RootfsTarget(image).walk("/etc")]
    assert "/etc/usr-link" in paths
    assert not any(p.startswith("/etc/usr-link/") for p in paths)


@pytest.mark.parametrize(("top", "first"), [("/", "/etc"), ("/usr/", "/usr/lib"), ("/usr//", "/usr/lib")])
def test_walk_names_entries_by_their_image_path_however_the_top_is_written(
    image: Path, top: str, first: str
) -> None:
    """The backend names each entry as it lists it (no copy per entry): the same paths as before."""
    entries = list(RootfsTarget(image).walk(top))
    paths = [st.path for st in entries]
    assert first in paths and not any("//" in p or p.endswith("/") for p in paths), paths
    service = next(st for st in entries if st.path.endswith("/a.service"))
    assert service.kind is FileKind.FILE and service.size == len("[Service]\n")


def test_walk_through_a_link_names_entries_below_the_link(image: Path) -> None:
    assert [st.path for st in RootfsTarget(image).walk("/lib/systemd")] == [
        "/lib/systemd/system",
        "/lib/systemd/system/a.service",
    ]


def test_walk_says_of_each_entry_what_its_lstat_says_in_name_order(image: Path) -> None:
    """The walk makes its entries in one loop (not through ImageStat.from_os): the same stats."""
    os.mkfifo(image / "etc/fifo")
    os.symlink("shadow", image / "etc/link")
    (image / "etc/b-dir").mkdir(mode=0o1777)
    (image / "etc/b-dir").chmod(0o1777)
    (image / "etc/a-file").write_text("12345")
    (image / "etc/a-file").chmod(0o4755)
    target = RootfsTarget(image)
    entries = list(target.walk("/etc"))
    assert [st.path for st in entries] == [
        "/etc/a-file",
        "/etc/b-dir",
        "/etc/fifo",
        "/etc/link",
        "/etc/shadow",
    ]
    assert entries == [target.lstat(st.path) for st in entries]
    kinds = {st.path: (st.kind, st.mode) for st in entries}
    assert kinds["/etc/a-file"] == (FileKind.FILE, 0o4755) and kinds["/etc/b-dir"] == (FileKind.DIR, 0o1777)
    assert kinds["/etc/fifo"][0] is FileKind.FIFO and kinds["/etc/link"][0] is FileKind.SYMLINK
    assert all(type(st).__name__ == "ImageStat" and st.uid == os.getuid() for st in entries)


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_bad_root_is_a_target_error(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "root"
    if kind == "file":
        root.write_text("")
    with pytest.raises(TargetError):
        RootfsTarget(root)
