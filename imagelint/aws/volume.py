"""The runner-side half of volume mode: who am I, which device is the new volume, mount it read-only.

This part needs a real EC2 runner with a real EBS device and root, so it cannot run in the test
suite; :class:`VolumeHost` is the seam. :class:`Ec2VolumeHost` is the real one (IMDSv2, udev's
``/dev/disk/by-id`` names, ``mount``/``umount``); the tests inject a host that "mounts" a local image
tree and exercise the whole AWS side (create, attach, detach, delete) against moto.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from imagelint.errors import TargetError

IMDS = "http://169.254.169.254"
ATTACH_DEVICE = "/dev/sdf"


class VolumeHost(Protocol):
    def identity(self) -> tuple[str, str]:
        """(instance id, availability zone) of this runner."""
        ...

    def find_device(self, volume_id: str, timeout: float) -> Path: ...

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

    def find_device(self, volume_id: str, timeout: float) -> Path:
        """Nitro: /dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123...; Xen: /dev/sdf or /dev/xvdf."""
        serial = volume_id.replace("-", "")
        candidates = [
            Path(f"/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_{serial}"),
            Path(ATTACH_DEVICE),
            Path(ATTACH_DEVICE.replace("/sd", "/xvd")),
        ]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for disk in candidates:
                if disk.exists():
                    part = Path(f"{disk}-part1") if disk.name.startswith("nvme-") else Path(f"{disk}1")
                    return (part if part.exists() else disk).resolve()
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
