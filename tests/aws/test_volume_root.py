"""Volume mode's root-filesystem lookup on lsblk's JSON for an attached EBS disk: the root on any
partition, a GPT root type first, LVM refused clearly. (Real loop-device disks cannot be used here:
the machines this runs on give loop devices no partition nodes that lsblk sees.)"""

from __future__ import annotations

import pytest

from imagelint.errors import TargetError

ESP = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
LINUX = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"
ROOT_X86_64 = "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709"
LVM = "E6D6D379-F507-44C2-A23C-238F2A3DF928"


def _lsblk(*parts: tuple[str, str | None, str, int]) -> dict:
    """lsblk -J -b -p -o PATH,TYPE,FSTYPE,PARTTYPE,SIZE's shape for one disk."""
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
