"""The runner-side half of volume mode: who am I, which device is the new volume, mount it read-only.

This part needs a real EC2 runner with a real EBS device and root, so it cannot run in the test
suite; :class:`VolumeHost` is the seam. :class:`Ec2VolumeHost` is the real one (IMDSv2, udev's
``/dev/disk/by-id`` names, ``mount``/``umount``); the tests inject a host that "mounts" a local image
tree and exercise the whole AWS side (create, attach, detach, delete) against moto.

- The device name to attach at (:func:`device_slot`) is one the runner's ``BlockDeviceMappings``
  do not list and no local ``/dev`` node uses, chosen and attached under a local lock, so two runs
  on one runner never pick the same one.
- The root filesystem (:func:`pick_root`, from ``lsblk``'s JSON) may be on any partition: a GPT
  root partition type first, else the largest Linux filesystem. A root on LVM is refused with a
  clear line (activating the image's volume group would change the runner's LVM state, and its
  name may collide with the runner's own): use ``--mode launch`` for such images.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from imagelint.errors import TargetError

IMDS = "http://169.254.169.254"
ATTACH_DEVICE = "/dev/sdf"
DEVICE_NAMES = tuple(f"/dev/sd{letter}" for letter in "fghijklmnop")  # EC2's recommended range
LINUX_FS = ("ext4", "ext3", "ext2", "xfs", "btrfs")
# GPT partition types of a Linux root (Discoverable Partitions Specification): x86-64, arm64
ROOT_TYPES = ("4f68bce3-e8cd-4db1-96e7-fbcaf984b709", "b921b045-1df0-41c3-af44-4c6f280d3fae")
LOCK_DIR = Path("/run/lock")


def _short(name: str) -> str:
    """/dev/sdf and /dev/xvdf are the same slot."""
    return name.rsplit("/", 1)[-1].removeprefix("xv").removeprefix("s").removeprefix("d")


def _lock_file(path: Path) -> int:
    """A descriptor of the runner-wide lock file, whoever made it: read-only (flock needs no more), so
    a user opens the one root made (0644), and never through a symlink planted in the shared directory.
    Opened before it is created: a file another user owns in a sticky directory refuses O_CREAT, even
    for root (fs.protected_regular)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        try:
            return os.open(path, flags)
        except FileNotFoundError:
            pass
        try:
            return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:  # made meanwhile by another run
            return os.open(path, flags)
    except OSError as err:
        raise TargetError(f"cannot open the lock of the device names {path}: {err.strerror}") from None


@contextlib.contextmanager
def device_slot(ec2: Any, instance_id: str, lock_dir: Path | None = None) -> Iterator[str]:
    """A device name free on this runner; hold the context until the attachment is in use."""
    from imagelint.aws.ec2 import describe_instance

    directory = lock_dir or (LOCK_DIR if LOCK_DIR.is_dir() else Path(tempfile.gettempdir()))
    with open(_lock_file(directory / "imagelint-attach.lock"), "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            mapped = describe_instance(ec2, instance_id).get("BlockDeviceMappings", [])
            used = {_short(m["DeviceName"]) for m in mapped}
            for name in DEVICE_NAMES:
                slot = _short(name)
                if slot not in used and not Path(name).exists() and not Path(f"/dev/xvd{slot}").exists():
                    yield name
                    return
            raise TargetError(
                f"{instance_id} has no free device name in {DEVICE_NAMES[0]}..{DEVICE_NAMES[-1]}"
            )
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def pick_root(disk: dict[str, Any]) -> str:
    """The root filesystem's path in one ``lsblk -J -b -p -o PATH,TYPE,FSTYPE,PARTTYPE,SIZE`` disk."""
    parts = disk.get("children") or [disk]
    linux = [p for p in parts if p.get("fstype") in LINUX_FS]
    lvm = [p for p in parts if p.get("fstype") == "LVM2_member"]
    typed = [p for p in linux if str(p.get("parttype") or "").lower() in ROOT_TYPES]
    if typed:
        return str(typed[0]["path"])
    best = max(linux, key=lambda p: int(p.get("size") or 0), default=None)
    if lvm and (best is None or int(lvm[0].get("size") or 0) > int(best.get("size") or 0)):
        raise TargetError(
            f"the root filesystem is on LVM ({lvm[0]['path']} is an LVM physical volume): volume mode does "
            "not activate an image's volume group on the runner; use --mode launch"
        )
    if best is None:
        kinds = ", ".join(f"{p.get('path')}={p.get('fstype') or 'none'}" for p in parts)
        raise TargetError(f"no Linux filesystem on {disk.get('path')} ({kinds})")
    return str(best["path"])


def root_filesystem(device: Path) -> Path:
    """Run ``lsblk`` on the attached disk and :func:`pick_root` from its answer."""
    proc = subprocess.run(
        ["lsblk", "-J", "-b", "-p", "-o", "PATH,TYPE,FSTYPE,PARTTYPE,SIZE", str(device)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if proc.returncode != 0:
        raise TargetError(f"lsblk {device} failed: {proc.stderr.strip()[:200]}")
    try:
        disks = json.loads(proc.stdout)["blockdevices"]
    except (ValueError, KeyError):
        raise TargetError(f"lsblk {device}: unreadable answer") from None
    return Path(pick_root(disks[0]))


class VolumeHost(Protocol):
    def identity(self) -> tuple[str, str]:
        """(instance id, availability zone) of this runner."""
        ...

    def find_device(self, volume_id: str, timeout: float, device: str = ATTACH_DEVICE) -> Path:
        """The root filesystem's block device of the volume attached at ``device``."""
        ...

    def mounted(self, device: Path) -> contextlib.AbstractContextManager[Path]:
        """Mount read-only; yield the mount point; unmount on exit."""
        ...


class Ec2VolumeHost:
    """The real runner: an EC2 instance with IMDSv2, root, and mount(8)."""

    def _imds(self, path: str, token: str) -> str:
        request = urllib.request.Request(
            f"{IMDS}/latest/meta-data/{path}", headers={"X-aws-ec2-metadata-token": token}
        )
        with urllib.request.urlopen(request, timeout=2) as reply:
            return str(reply.read().decode())

    def identity(self) -> tuple[str, str]:
        try:
            request = urllib.request.Request(
                f"{IMDS}/latest/api/token",
                method="PUT",
                headers={"X-aws-ec2-metadata-token-ttl-seconds": "300"},
            )
            with urllib.request.urlopen(request, timeout=2) as reply:
                token = reply.read().decode()
            return self._imds("instance-id", token), self._imds("placement/availability-zone", token)
        except OSError as exc:
            raise TargetError(
                f"--mode volume runs on an EC2 instance; the instance metadata service did not answer ({exc})"
            ) from None

    def find_device(self, volume_id: str, timeout: float, device: str = ATTACH_DEVICE) -> Path:
        """Nitro: /dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123...; Xen: /dev/sdX or /dev/xvdX;
        then the root filesystem on it (:func:`root_filesystem`: any partition, LVM refused)."""
        serial = volume_id.replace("-", "")
        candidates = [
            Path(f"/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_{serial}"),
            Path(device),
            Path(device.replace("/sd", "/xvd")),
        ]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for disk in candidates:
                if disk.exists():
                    time.sleep(1)  # udev creates the partition nodes just after the disk's
                    return root_filesystem(disk.resolve())
            time.sleep(1)
        raise TargetError(f"attached {volume_id} but no device appeared ({', '.join(map(str, candidates))})")

    @contextlib.contextmanager
    def mounted(self, device: Path) -> Iterator[Path]:
        fstype = subprocess.run(
            ["blkid", "-o", "value", "-s", "TYPE", str(device)], capture_output=True, text=True, check=False
        ).stdout.strip()
        options = "ro,nosuid,nodev,noexec" + {"ext4": ",noload", "ext3": ",noload", "xfs": ",nouuid"}.get(
            fstype, ""
        )
        mountpoint = Path(tempfile.mkdtemp(prefix="imagelint-vol-"))
        proc = subprocess.run(
            ["mount", "-o", options, str(device), str(mountpoint)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            mountpoint.rmdir()
            raise TargetError(f"mount -o {options} {device} failed: {proc.stderr.strip()}")
        try:
            yield mountpoint
        finally:
            subprocess.run(["umount", str(mountpoint)], check=False)
            with contextlib.suppress(OSError):
                mountpoint.rmdir()
