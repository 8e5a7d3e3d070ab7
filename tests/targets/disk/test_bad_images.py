"""Disk images that cannot be judged: one line naming the image, exit 3 (inconclusive), never a pass.

Each is made by the real tools: a truncated copy, a disk of random bytes, a table whose only
partition holds no filesystem imagelint reads (vfat), an ext4 copied while mounted (its journal
needs recovery), an XFS copied while mounted (dirty log), a LUKS partition. Hostile headers (and
images that name a backing file) are in test_hostile_images.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from imagelint.errors import extra_hint
from tests.support import is_root, loop_devices_work, need, os_root, run_cli, run_cli_measured
from tests.targets.disk import images


def _one_line_inconclusive(path: Path, expected: str, *extra: str) -> str:
    audit = run_cli_measured("audit", str(path), *extra)
    audit.assert_one_line(3, expected)
    line = audit.stderr.strip()
    assert line.startswith(f"imagelint: error: {path}") and audit.stdout == "", (audit.stdout, line)
    units = run_cli_measured("units", str(path), *extra[:2] if extra[:1] == ("--partition",) else ())
    units.assert_one_line(3, expected)
    return line


def _small_ext4(tmp_path: Path, size: str = "8M") -> Path:
    tree = tmp_path / "tree"
    (tree / "etc").mkdir(parents=True)
    (tree / "usr").mkdir()
    (tree / "etc/os-release").write_text("ID=debian\n")
    out = tmp_path / "small.ext4"
    subprocess.run(
        ["mke2fs", "-q", "-t", "ext4", "-d", str(tree), str(out), size], check=True, capture_output=True
    )
    return out


def test_a_truncated_partitioned_image(debian_rootfs: Path, tmp_path: Path) -> None:
    need(shutil.which("sfdisk") is not None, "sfdisk is not installed")
    full = images.cached("gpt-ext4.raw", lambda out: images.gpt(images.ext4_fs(debian_rootfs), out))
    cut = tmp_path / "cut.raw"
    with open(full, "rb") as src, open(cut, "wb") as dst:
        dst.write(src.read(300 * images.MIB))
    _one_line_inconclusive(cut, "truncated")


def test_a_truncated_bare_filesystem(tmp_path: Path) -> None:
    fs = _small_ext4(tmp_path)
    os.truncate(fs, 2 * images.MIB)
    _one_line_inconclusive(fs, "truncated")


def test_an_unknown_partition_table(tmp_path: Path) -> None:
    junk = tmp_path / "junk.img"
    junk.write_bytes(os.urandom(4 * images.MIB))
    _one_line_inconclusive(junk, "no partition table")


def test_a_corrupt_gpt(debian_rootfs: Path, tmp_path: Path) -> None:
    full = images.cached("gpt-ext4.raw", lambda out: images.gpt(images.ext4_fs(debian_rootfs), out))
    bad = tmp_path / "bad-gpt.raw"
    subprocess.run(["cp", "--sparse=always", str(full), str(bad)], check=True)
    with open(bad, "r+b") as f:  # the partition entries (LBA 2 on): garbage, the protective MBR kept
        f.seek(1024)
        f.write(os.urandom(16384))
    line = _one_line_inconclusive(bad, "")
    assert any(word in line for word in ("partition table", "no root filesystem", "unrecognised", "corrupt"))


def test_an_unsupported_filesystem(tmp_path: Path) -> None:
    need(
        shutil.which("mkfs.vfat") is not None and shutil.which("sfdisk") is not None,
        "dosfstools/fdisk missing",
    )
    img = tmp_path / "vfat-only.raw"
    images._partitioned(img, "gpt", [("U", None, images.EFI_SIZE)])
    _one_line_inconclusive(img, "unsupported or unrecognised filesystem")


def _need_loop_devices() -> None:
    need(loop_devices_work(), "mounting an image needs a loop device (root, one this machine lends)")


def _copied_while_mounted(fs: Path, tmp_path: Path) -> Path:
    """A copy of the filesystem image taken while it is mounted and written to (not cleanly unmounted)."""
    _need_loop_devices()
    mnt = Path(tempfile.mkdtemp(prefix="imagelint-dirty-"))
    copy = tmp_path / f"dirty-{fs.name}"
    try:
        subprocess.run(["mount", "-o", "loop", str(fs), str(mnt)], check=True, capture_output=True)
        try:
            (mnt / "etc/written-while-mounted").write_text("x\n")
            subprocess.run(["sync"], check=True)
            subprocess.run(["cp", "--sparse=always", str(fs), str(copy)], check=True)
        finally:
            subprocess.run(["umount", str(mnt)], check=True, capture_output=True)
    finally:
        mnt.rmdir()
    return copy


def test_an_ext4_whose_journal_needs_recovery(tmp_path: Path) -> None:
    need(is_root(), "mounting needs root")
    dirty = _copied_while_mounted(_small_ext4(tmp_path), tmp_path)
    _one_line_inconclusive(dirty, "journal needs recovery")


def test_a_dirty_xfs_log(tmp_path: Path) -> None:
    _need_loop_devices()  # root is not enough: a container may lend it none
    need(shutil.which("mkfs.xfs") is not None, "xfsprogs is not installed")
    fs = tmp_path / "small.xfs"
    with open(fs, "wb") as f:
        f.truncate(300 * images.MIB)
    subprocess.run(["mkfs.xfs", "-q", str(fs)], check=True)
    mnt = Path(tempfile.mkdtemp(prefix="imagelint-xfs-"))
    try:
        subprocess.run(["mount", "-o", "loop", str(fs), str(mnt)], check=True)
        os_root(mnt)
        subprocess.run(["umount", str(mnt)], check=True)
    finally:
        mnt.rmdir()
    assert run_cli("audit", str(fs), "--no-builtin-rules").returncode == 0  # cleanly unmounted: read
    dirty = _copied_while_mounted(fs, tmp_path)
    _one_line_inconclusive(dirty, "XFS log is dirty")


def test_a_luks_partition(tmp_path: Path) -> None:
    need(shutil.which("cryptsetup") is not None, "cryptsetup is not installed")
    img = tmp_path / "luks.raw"
    images._partitioned(img, "gpt", [("U", None, images.EFI_SIZE), ("L", None, 32 * images.MIB)])
    part = tmp_path / "luks.part"
    with open(part, "wb") as f:
        f.truncate(32 * images.MIB)
    subprocess.run(
        ["cryptsetup", "luksFormat", "-q", "--type", "luks2", "--pbkdf", "pbkdf2",
         "--pbkdf-force-iterations", "1000", "--key-file", "-", str(part)],
        input=b"secret", check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        ["dd", f"if={part}", f"of={img}", "bs=1M", f"seek={(images.MIB + images.EFI_SIZE) // images.MIB}",
         "conv=notrunc", "status=none"],
        check=True,
    )  # fmt: skip
    _one_line_inconclusive(img, "encrypted (LUKS)")


def test_partition_out_of_range_and_on_a_directory(tmp_path: Path) -> None:
    fs = _small_ext4(tmp_path)
    _one_line_inconclusive(fs, "no such partition", "--partition", "7")
    proc = run_cli("audit", str(tmp_path), "--partition", "1")
    assert proc.returncode == 2 and "--partition applies to disk image files" in proc.stderr


@pytest.mark.parametrize("module", ["dissect.volume"])
def test_a_missing_disk_extra_is_one_line_naming_it(tmp_path: Path, module: str) -> None:
    """With the dissect libraries hidden, an image file gets exit 2 and the pip command, not a traceback."""
    fs = _small_ext4(tmp_path)
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nclass _Block:\n    def find_spec(self, name, path=None, target=None):\n"
        f"        if name == {module!r} or name.startswith({module!r} + '.'):\n"
        "            raise ImportError(name=name)\n"
        "        return None\nsys.meta_path.insert(0, _Block())\n"
    )
    proc = run_cli("audit", str(fs), env={"PYTHONPATH": str(blocker)})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0
    assert extra_hint("disk") in proc.stderr  # commands that work today (tests/test_install_hints.py)
