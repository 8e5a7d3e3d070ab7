"""Disk images built from the real debootstrapped rootfs with the faulty sample planted, cached per machine.

Each image is built once under ``~/.cache/imagelint-tests/disk-images`` (temp file + rename, under a
lock), keyed by this builder's version and the sample's content. The real tools make them: mke2fs -d
(no root), mkfs.xfs + a loop mount (root), sfdisk (GPT with an EFI partition, MBR), LVM on a loop
device (root; unique VG names, always detached), qemu-img convert.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.support import REPO, build_tree, copy_rootfs

VERSION = "1"
MIB = 1024 * 1024
FS_SIZE = 600 * MIB
EFI_SIZE = 34 * MIB
ROOT_UUID = "4c2d8f1e-8a57-4b1b-9d55-0f6f3d2a7c11"
VAR_UUID = "9a0e3b7c-2f41-4e8d-b6a1-5d7c3e9f1a22"


def cache_dir() -> Path:
    xdg = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    base = Path(os.environ.get("IMAGELINT_TEST_CACHE", xdg / "imagelint-tests"))
    sample = (REPO / "examples/sample-image.yaml").read_bytes()
    key = hashlib.sha256(VERSION.encode() + sample).hexdigest()[:12]
    d = base / f"disk-images-{key}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def run(*cmd: str | Path) -> None:
    subprocess.run([str(c) for c in cmd], check=True, capture_output=True)


def plant_sample(root: Path) -> Path:
    """The faulty sample image's files written over a copy of the rootfs (existing files replaced)."""
    entries = yaml.safe_load((REPO / "examples/sample-image.yaml").read_text(encoding="utf-8"))["files"]
    for image_path in entries:
        host = root / image_path.lstrip("/")
        if host.is_symlink() or host.is_file():
            host.unlink()
    return build_tree(root, entries)


def cached(name: str, build: Callable[[Path], None]) -> Path:
    """``cache/name``, built by ``build(tmp)`` once: under a lock, into a temp file renamed into place."""
    d = cache_dir()
    final = d / name
    if final.exists():
        return final
    with open(d / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if final.exists():
            return final
        tmp = d / f".{name}.{os.getpid()}.partial"
        try:
            build(tmp)
            os.chmod(tmp, 0o644)  # readable by an unprivileged user (the nobody tests)
            os.rename(tmp, final)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return final


def sample_tree(debian_rootfs: Path) -> Path:
    """The planted tree (a directory, cached like the images: audits of it are the expected answers)."""
    d = cache_dir()
    final = d / "tree"
    if final.exists():
        return final
    with open(d / "tree.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not final.exists():
            tmp = d / f".tree.{os.getpid()}.partial"
            shutil.rmtree(tmp, ignore_errors=True)
            plant_sample(copy_rootfs(debian_rootfs, tmp))
            os.rename(tmp, final)
    return final


def _ext4(tree: Path, out: Path, *, fs_uuid: str = ROOT_UUID, size: int = FS_SIZE) -> None:
    run("mke2fs", "-q", "-F", "-t", "ext4", "-U", fs_uuid, "-d", tree, out, str(size // 1024) + "k")


def _xfs(tree: Path, out: Path) -> None:
    """mkfs.xfs, loop-mount, copy the tree, unmount (root only)."""
    with open(out, "wb") as f:
        f.truncate(FS_SIZE)
    run("mkfs.xfs", "-q", "-f", "-m", f"uuid={ROOT_UUID}", out)
    mnt = Path(tempfile.mkdtemp(prefix="imagelint-xfs-"))
    try:
        run("mount", "-o", "loop", out, mnt)
        try:
            run("cp", "-a", f"{tree}/.", mnt)
        finally:
            run("umount", mnt)
    finally:
        mnt.rmdir()


def ext4_fs(debian_rootfs: Path) -> Path:
    return cached("ext4.fs", lambda out: _ext4(sample_tree(debian_rootfs), out))


def xfs_fs(debian_rootfs: Path) -> Path:
    return cached("xfs.fs", lambda out: _xfs(sample_tree(debian_rootfs), out))


def _partitioned(out: Path, label: str, parts: list[tuple[str, Path | None, int]]) -> None:
    """A disk with the partition ``label`` (gpt/dos) of (type, filesystem image or None, size)."""
    total = MIB + sum(size for _t, _f, size in parts) + MIB
    with open(out, "wb") as f:
        f.truncate(total)
    script = f"label: {label}\n" + "".join(f"size={size // 512}, type={ptype}\n" for ptype, _f, size in parts)
    subprocess.run(["sfdisk", "-q", str(out)], input=script, text=True, check=True, capture_output=True)
    offset = MIB
    for ptype, fs, size in parts:
        if fs is not None:
            run(
                "dd",
                f"if={fs}",
                f"of={out}",
                "bs=1M",
                f"seek={offset // MIB}",
                "conv=notrunc,sparse",
                "status=none",
            )
        elif ptype in ("U", "ef"):
            efi = out.with_suffix(".efi")
            with open(efi, "wb") as f:
                f.truncate(size)
            run("mkfs.vfat", "-F", "32", efi)
            run(
                "dd",
                f"if={efi}",
                f"of={out}",
                "bs=1M",
                f"seek={offset // MIB}",
                "conv=notrunc,sparse",
                "status=none",
            )
            efi.unlink()
        offset += size


def gpt(fs: Path, out: Path) -> None:
    _partitioned(out, "gpt", [("U", None, EFI_SIZE), ("L", fs, fs.stat().st_size)])


def mbr(fs: Path, out: Path) -> None:
    _partitioned(out, "dos", [("ef", None, EFI_SIZE), ("83", fs, fs.stat().st_size)])


_LVM_CONFIG = (
    'devices { use_devicesfile=0 filter=["a|^/dev/loop|", "r|.*|"] } '
    "activation { udev_sync=0 udev_rules=0 } backup { backup=0 archive=0 }"
)


def _lvm(*args: str) -> str:
    return subprocess.run(
        [args[0], "--config", _LVM_CONFIG, "--driverloaded", "n", *args[1:]],  # no device-mapper used
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def lv_root(dev: str, vg: str, size: int, *, extent: str) -> int:
    """A PV on ``dev``, a VG ``vg`` and an inactive LV 'root' of ``size`` bytes; the PV's pe_start.

    No host state is left: no activation (no device-mapper), no metadata backups (config above)."""
    _lvm("pvcreate", "-q", "-ff", "-y", dev)
    _lvm("vgcreate", "-q", "-s", extent, vg, dev)
    _lvm("lvcreate", "-q", "-y", "-an", "-Zn", "-Wn", "-n", "root", "-L", f"{size // MIB}m", vg)
    return int(_lvm("pvs", "--noheadings", "--units", "b", "--nosuffix", "-o", "pe_start", dev).strip())


def lvm(fs: Path, out: Path) -> None:
    """MBR with one partition holding an LVM PV, a VG (unique name) and a linear LV 'root' holding the
    filesystem. Made by the real LVM tools on a loop device; the LV is never activated (no
    device-mapper needed): the filesystem is written where LVM placed the LV's extents."""
    size = fs.stat().st_size + 16 * MIB
    _partitioned(out, "dos", [("8e", None, size)])
    vg = f"ilt{uuid.uuid4().hex[:10]}"
    dev = subprocess.run(
        ["losetup", "--find", "--show", "--offset", str(MIB), "--sizelimit", str(size), str(out)],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    try:
        pe_start = lv_root(dev, vg, fs.stat().st_size, extent="4m")
        ranges = _lvm("lvs", "--noheadings", "-o", "seg_pe_ranges", f"{vg}/root").strip()
        first_pe = int(ranges.split(":")[1].split("-")[0])
        offset = MIB + pe_start + first_pe * 4 * MIB
        run(
            "dd",
            f"if={fs}",
            f"of={out}",
            "bs=1M",
            f"seek={offset}",
            "oflag=seek_bytes",
            "conv=notrunc,sparse",
            "status=none",
        )
    finally:
        subprocess.run(["losetup", "-d", dev], check=False, capture_output=True)


def separate_var(debian_rootfs: Path, out: Path) -> None:
    """GPT: EFI, a root without /var's content, and /var on its own ext4, mounted by UUID in fstab."""
    tree = sample_tree(debian_rootfs)
    work = Path(tempfile.mkdtemp(prefix="imagelint-var-"))
    try:
        root = copy_rootfs(tree, work / "root")
        var = work / "var"
        shutil.move(root / "var", var)
        (root / "var").mkdir()
        fstab = root / "etc/fstab"
        fstab.write_text(
            f"# split /var\nUUID={ROOT_UUID} / ext4 defaults 0 1\nUUID={VAR_UUID} /var ext4 defaults 0 2\n"
            "proc /proc proc defaults 0 0\n"
        )
        _ext4(root, work / "root.fs")
        _ext4(var, work / "var.fs", fs_uuid=VAR_UUID, size=200 * MIB)
        _partitioned(
            out,
            "gpt",
            [("U", None, EFI_SIZE), ("L", work / "root.fs", FS_SIZE), ("L", work / "var.fs", 200 * MIB)],
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def convert(src: Path, out: Path, fmt: str, *options: str) -> None:
    run("qemu-img", "convert", "-O", fmt, *options, src, out)
