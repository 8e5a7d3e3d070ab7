"""Volume mode's root-filesystem lookup on real disks: a disk image partitioned with sfdisk, real
filesystems (mkfs.vfat, mkfs.ext4, mkfs.xfs) or an LVM physical volume (pvcreate), attached as a
loop device with partition scanning, read by the real lsblk."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from imagelint.aws.volume import root_filesystem
from imagelint.errors import TargetError
from tests.support import is_root, need

ESP = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
LINUX = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"
ROOT_X86_64 = "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709"
LVM = "E6D6D379-F507-44C2-A23C-238F2A3DF928"


@contextmanager
def disk(tmp_path: Path, layout: list[tuple[str, str]], mkfs: list[list[str] | None]) -> Iterator[Path]:
    """A 160 MiB GPT disk image with ``layout`` [(size, type GUID)], attached at a loop device;
    ``mkfs[i]`` formats partition i+1 (the partition path is appended)."""
    need(is_root(), "needs root (loop devices)")
    for tool in ("losetup", "sfdisk", "lsblk"):
        need(shutil.which(tool) is not None, f"{tool} missing")
    image = tmp_path / "disk.img"
    with image.open("wb") as fh:
        fh.truncate(160 * 1024 * 1024)
    script = "label: gpt\n" + "".join(f"size={size}, type={guid}\n" for size, guid in layout)
    subprocess.run(["sfdisk", "-q", str(image)], input=script, text=True, check=True)
    loop = subprocess.run(
        ["losetup", "--find", "--show", "--partscan", str(image)], capture_output=True, text=True, check=False
    )
    need(loop.returncode == 0, f"no loop device here: {loop.stderr.strip()}")
    device = Path(loop.stdout.strip())
    try:
        if shutil.which("udevadm"):
            subprocess.run(["udevadm", "settle"], check=False, timeout=30)
        for n, command in enumerate(mkfs, start=1):
            if command:
                part = Path(f"{device}p{n}")
                need(part.exists(), f"{part} did not appear (no partition scanning on loop devices here)")
                subprocess.run([*command, str(part)], check=True, capture_output=True)
        yield device
    finally:
        subprocess.run(["pvremove", "-ff", "-y", f"{device}p2"], check=False, capture_output=True)
        subprocess.run(["losetup", "-d", str(device)], check=False)


def _lsblk(*parts: tuple[str, str | None, str, int]) -> dict:
    """lsblk -J -b -p -o PATH,TYPE,FSTYPE,PARTTYPE,SIZE's shape for one disk (for machines whose loop
    devices have no partition scanning, where the real-disk tests below skip)."""
    children = [
        {"path": f"/dev/nvme1n1p{n}", "type": "part", "fstype": fs, "parttype": t.lower(), "size": size}
        for n, (t, fs, _label, size) in enumerate(parts, start=1)
    ]
    return {"path": "/dev/nvme1n1", "type": "disk", "fstype": None, "children": children}


def test_pick_root_rules():
    from imagelint.aws.volume import pick_root

    mib = 1024 * 1024
    # Ubuntu/Debian cloud images: root is p1 but BIOS boot/ESP partitions follow it
    assert (
        pick_root(_lsblk((LINUX, "ext4", "", 8000 * mib), (ESP, "vfat", "", 100 * mib))) == "/dev/nvme1n1p1"
    )
    # Amazon Linux / RHEL-like: ESP first, /boot, then root
    layout = ((ESP, "vfat", "", 200 * mib), (LINUX, "xfs", "", 1000 * mib), (LINUX, "xfs", "", 9000 * mib))
    assert pick_root(_lsblk(*layout)) == "/dev/nvme1n1p3"
    typed = ((ESP, "vfat", "", 1), (ROOT_X86_64, "ext4", "", 10), (LINUX, "ext4", "", 99))
    assert pick_root(_lsblk(*typed)) == "/dev/nvme1n1p2"
    with pytest.raises(TargetError, match="root filesystem is on LVM"):
        pick_root(_lsblk((LINUX, "xfs", "", 1000 * mib), (LVM, "LVM2_member", "", 9000 * mib)))
    # an unpartitioned volume is its own filesystem
    assert pick_root({"path": "/dev/xvdf", "type": "disk", "fstype": "ext4", "size": 1}) == "/dev/xvdf"


@pytest.mark.root
def test_root_on_a_later_partition_is_found(tmp_path):
    layout = [("16M", ESP), ("32M", LINUX), ("96M", LINUX)]
    mkfs = [["mkfs.vfat"], ["mkfs.ext4", "-q", "-F"], ["mkfs.ext4", "-q", "-F"]]
    with disk(tmp_path, layout, mkfs) as device:
        assert root_filesystem(device) == Path(f"{device}p3")  # the largest Linux filesystem, not -part1


@pytest.mark.root
def test_gpt_root_type_wins_over_size(tmp_path):
    need(shutil.which("mkfs.xfs") is not None, "mkfs.xfs missing")
    layout = [("16M", ESP), ("48M", ROOT_X86_64), ("80M", LINUX)]
    mkfs = [["mkfs.vfat"], ["mkfs.ext4", "-q", "-F"], ["mkfs.xfs", "-q", "-f"]]
    with disk(tmp_path, layout, mkfs) as device:
        assert root_filesystem(device) == Path(f"{device}p2")


@pytest.mark.root
def test_root_on_lvm_is_refused_clearly(tmp_path):
    need(shutil.which("pvcreate") is not None, "pvcreate missing")
    layout = [("32M", LINUX), ("112M", LVM)]
    mkfs = [["mkfs.ext4", "-q", "-F"], ["pvcreate", "-q", "-y", "-ff"]]
    with (
        disk(tmp_path, layout, mkfs) as device,
        pytest.raises(TargetError, match="root filesystem is on LVM"),
    ):
        root_filesystem(device)


@pytest.mark.root
def test_no_linux_filesystem(tmp_path):
    with (
        disk(tmp_path, [("16M", ESP)], [["mkfs.vfat"]]) as device,
        pytest.raises(TargetError, match="no Linux"),
    ):
        root_filesystem(device)
