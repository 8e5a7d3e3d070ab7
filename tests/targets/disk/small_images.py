"""Small real disk images (a few MiB, made by mke2fs, sfdisk, LVM, mkfs.xfs, qemu-img) to patch into
hostile ones: the regression tests and ``benchmarks/fuzz_disk.py`` change a few header bytes of these.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

from tests.targets.disk import images

MIB = 1024 * 1024
OS_RELEASE = "ID=debian\nVERSION_ID=12\n"


def run(*cmd: str | Path, cwd: Path | None = None) -> str:
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True, cwd=cwd).stdout


def ext(
    out: Path,
    files: dict[str, str] | None = None,
    *,
    fstype: str = "ext4",
    size: str = "8M",
    fs_uuid: str | None = None,
    root: bool = True,
) -> Path:
    """A filesystem holding a minimal root (the marks of an OS root: os-release, /usr, an init; none
    when not ``root``) and ``files`` (image path -> text), with the UUID ``fs_uuid`` when given."""
    tree = out.parent / f"{out.name}.tree"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    base = {"/etc/os-release": OS_RELEASE, "/usr/.keep": "", "/usr/lib/systemd/systemd": ""} if root else {}
    for path, text in {**base, **(files or {})}.items():
        host = tree / path.lstrip("/")
        host.parent.mkdir(parents=True, exist_ok=True)
        host.write_text(text)
    uuid = ("-U", fs_uuid) if fs_uuid else ()
    run("mke2fs", "-q", "-F", "-t", fstype, *uuid, "-d", tree, out, size)
    shutil.rmtree(tree)
    return out


def partitioned(out: Path, label: str, fs: Path) -> Path:
    """A disk with one partition (``gpt`` or ``dos``) holding ``fs``."""
    images._partitioned(out, label, [("L" if label == "gpt" else "83", fs, fs.stat().st_size)])
    return out


def convert(src: Path, out: Path, fmt: str, *options: str) -> Path:
    run("qemu-img", "convert", "-O", fmt, *options, src, out)
    return out


def lvm(out: Path, fs: Path) -> Path:
    """A whole-disk LVM PV (no partition table), a VG and an LV 'root' holding ``fs`` (root: loop device)."""
    size = fs.stat().st_size + 8 * MIB
    with open(out, "wb") as f:
        f.truncate(size)
    dev = run("losetup", "--find", "--show", out).strip()
    vg = f"iltsmall{out.stat().st_ino}"
    try:
        pe_start = images.lv_root(dev, vg, fs.stat().st_size, extent="1m")
    finally:
        subprocess.run(["losetup", "-d", dev], check=False, capture_output=True)
    run(
        "dd",
        f"if={fs}",
        f"of={out}",
        "bs=1M",
        f"seek={pe_start}",
        "oflag=seek_bytes",
        "conv=notrunc",
        "status=none",
    )
    return out


def xfs(out: Path) -> Path:
    """An empty XFS of the smallest size mkfs.xfs makes (sparse), with a root made without mounting."""
    with open(out, "wb") as f:
        f.truncate(300 * MIB)
    run("mkfs.xfs", "-q", "-f", "-p", _xfs_protofile(out.parent), out)
    return out


def _xfs_protofile(d: Path) -> Path:
    """An mkfs.xfs prototype file making /etc/os-release, /usr and /usr/lib/systemd/systemd (so the
    XFS is an OS root)."""
    release = d / "os-release.src"
    release.write_text(OS_RELEASE)
    init = d / "init.src"
    init.write_text("")
    proto = d / "xfs.proto"
    proto.write_text(
        f"/dummy\n0 0\nd--755 0 0\netc d--755 0 0\nos-release ---644 0 0 {release}\n$\n"
        f"usr d--755 0 0\nlib d--755 0 0\nsystemd d--755 0 0\nsystemd ---755 0 0 {init}\n$\n$\n$\n$\n"
    )
    return proto


def inode_offset(fs: Path, image_path: str) -> int:
    """Where ``image_path``'s inode lies in the ext filesystem image (from debugfs's imap)."""
    out = run("debugfs", "-R", f"imap {image_path}", fs)
    located = out.split("located at block ")[1].split()
    block, offset = int(located[0].rstrip(",")), int(located[2], 16)
    return block * block_size(fs) + offset


def block_size(fs: Path) -> int:
    return int(run("dumpe2fs", "-h", fs).split("Block size:")[1].split()[0])


def blocks_of(fs: Path, image_path: str) -> list[int]:
    return [int(b) for b in run("debugfs", "-R", f"blocks {image_path}", fs).split()]


def patch(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def set_inode_size(fs: Path, image_path: str, size: int) -> None:
    """Make an inode claim ``size`` bytes (i_size_lo at 4, i_size_high at 108)."""
    at = inode_offset(fs, image_path)
    patch(fs, at + 4, struct.pack("<I", size & 0xFFFFFFFF))
    patch(fs, at + 108, struct.pack("<I", size >> 32))
    reseal(fs, image_path)


def reseal(fs: Path, image_path: str) -> None:
    """Recompute the checksum of an inode patched in place, as a crafted image would carry it (debugfs
    writes it; -n: without checking the old one), so that what is tested is the field, not the seal."""
    run("debugfs", "-w", "-n", "-R", f"set_inode_field {image_path} checksum calc", fs)
