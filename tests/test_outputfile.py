"""An output file is created, or this user's regular file replaced whole, never written through what
is at the path (imagelint/outputfile.py): a link, a FIFO, a directory or another user's file is
refused with one line, before any work (exit 2); a path that changes during the run is exit 3; the
stale-output cleaner follows the same rule."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from imagelint import outputfile
from imagelint.errors import ExitCode
from tests.support import is_root, need

OTHER_UID = 54321
CANARY = b"another user's file\n"


def _canary(tmp_path: Path) -> Path:
    canary = tmp_path / "elsewhere" / "canary"
    canary.parent.mkdir()
    canary.write_bytes(CANARY)
    canary.chmod(0o600)
    return canary


def _link(path: Path, canary: Path) -> None:
    os.symlink(canary, path)


def _dangling(path: Path, canary: Path) -> None:
    os.symlink(canary.parent / "absent", path)


def _fifo(path: Path, canary: Path) -> None:
    os.mkfifo(path)


def _directory(path: Path, canary: Path) -> None:
    path.mkdir()


def _others(path: Path, canary: Path) -> None:
    need(is_root(), "chown to another uid needs root")
    path.write_bytes(CANARY)
    os.chown(path, OTHER_UID, OTHER_UID)


PLANTED: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "link": (_link, "is a symbolic link"),
    "dangling link": (_dangling, "is a symbolic link"),
    "fifo": (_fifo, "is a FIFO"),
    "directory": (_directory, "is a directory"),
    "another user's file": (_others, f"is owned by uid {OTHER_UID}"),
}


def _snapshot(path: Path) -> tuple[int, int, int, bytes | None]:
    st = path.lstat()
    data = path.read_bytes() if stat.S_ISREG(st.st_mode) else None
    return st.st_ino, st.st_mode, st.st_uid, data


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_what_is_planted_is_refused_and_left_alone(tmp_path: Path, kind: str) -> None:
    plant, why = PLANTED[kind]
    canary = _canary(tmp_path)
    path = tmp_path / "report.json"
    plant(path, canary)
    before, canary_before = _snapshot(path), _snapshot(canary)
    for attempt in (
        lambda: outputfile.check(path),
        lambda: outputfile.replace(path, b"{}"),
        lambda: outputfile.remove_stale(path),
    ):
        with pytest.raises(outputfile.Refused) as refused:
            attempt()
        assert refused.value.exit_code == ExitCode.USAGE
        assert why in str(refused.value) and str(path) in str(refused.value)
    assert _snapshot(path) == before and _snapshot(canary) == canary_before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "report.json"]  # no temporary


def test_a_path_that_changed_during_the_run_is_inconclusive(tmp_path: Path) -> None:
    canary = _canary(tmp_path)
    path = tmp_path / "report.json"
    found = outputfile.check(path)  # absent at the start
    _link(path, canary)  # a link appears while the run works
    with pytest.raises(outputfile.Changed) as changed:
        outputfile.replace(path, b"{}", expected=found)
    assert changed.value.exit_code == ExitCode.INCONCLUSIVE and "is a symbolic link" in str(changed.value)
    assert canary.read_bytes() == CANARY and path.is_symlink()

    path.unlink()
    path.write_bytes(b"mine, but not the one checked")
    with pytest.raises(outputfile.Changed):
        outputfile.replace(path, b"{}", expected=found)
    own = outputfile.check(path)
    (tmp_path / "other").write_bytes(b"another file of mine")  # made while the first exists: its own inode
    os.replace(tmp_path / "other", path)
    with pytest.raises(outputfile.Changed):
        outputfile.replace(path, b"{}", expected=own)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "report.json"]


def test_this_users_file_is_replaced_whole_keeping_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    outputfile.replace(path, b"first")
    assert path.read_bytes() == b"first"
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_umask()
    path.chmod(0o640)
    inode = path.stat().st_ino
    found = outputfile.check(path)
    outputfile.replace(path, b"second", expected=found)
    assert path.read_bytes() == b"second" and path.stat().st_ino != inode  # a new file, renamed in
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    outputfile.replace(path, b"third", mode=0o644)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    outputfile.remove_stale(path)
    assert not path.exists()
    outputfile.remove_stale(path)  # absent: nothing to do


def test_a_missing_directory_is_one_usage_line(tmp_path: Path) -> None:
    with pytest.raises(outputfile.Refused, match="does not exist"):
        outputfile.replace(tmp_path / "no" / "such" / "x.json", b"{}")
    assert not (tmp_path / "no").exists()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_a_character_device_is_written_in_place_and_never_removed(tmp_path: Path) -> None:
    """``-f json:/dev/null`` keeps working: a device only root can make is no planted trap (tested on
    a device node of our own, so a fault cannot touch the real /dev/null)."""
    need(is_root(), "mknod needs root")
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    before = _snapshot(null)
    assert outputfile.check(null) is not None
    outputfile.remove_stale(null)
    outputfile.replace(null, b"{}", expected=outputfile.check(null))
    assert _snapshot(null) == before and null.is_char_device()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_root_under_sudo_may_replace_the_invoking_users_file_and_no_one_elses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Action's sudo mode: root writes on the runner user's behalf (SUDO_UID, set by sudo), and
    hands the outputs back to that user; the next run replaces them. Any other user's file stays refused."""
    need(is_root(), "chown to another user needs root")
    path = tmp_path / "report.json"
    path.write_text("old")
    os.chown(path, OTHER_UID, OTHER_UID)
    monkeypatch.delenv("SUDO_UID", raising=False)
    with pytest.raises(outputfile.Refused, match=f"is owned by uid {OTHER_UID}"):
        outputfile.check(path)
    monkeypatch.setenv("SUDO_UID", str(OTHER_UID + 1))  # another user ran sudo
    with pytest.raises(outputfile.Refused, match=f"is owned by uid {OTHER_UID}"):
        outputfile.check(path)
    monkeypatch.setenv("SUDO_UID", str(OTHER_UID))
    outputfile.replace(path, b"{}", expected=outputfile.check(path))
    assert path.read_bytes() == b"{}" and not path.is_symlink()
