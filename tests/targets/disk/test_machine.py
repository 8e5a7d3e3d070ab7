"""The several disks of one machine (:func:`imagelint.targets.disk.open_disks`), on small real images
made with mke2fs -d and sfdisk: fstab mounts found on any disk by UUID or kernel name, and every
mount boot makes that the audit cannot see (an unreadable disk, a device on no disk without
``nofail``, an NVMe name among several disks) ending the run with one line naming the mount point."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import Any

import pytest

from imagelint.targets.disk import Disk, open_disks
from imagelint.targets.disk.errors import DiskImageError
from tests.targets.disk.small_images import ext, partitioned

DATA_UUID = "0b5e6a3c-1d2e-4f50-8a9b-7c6d5e4f3a21"


def _root(tmp_path: Path, fstab: str) -> Path:
    """A GPT disk whose partition 1 is a minimal root with this fstab (a new one per call)."""
    d = Path(tempfile.mkdtemp(dir=tmp_path))
    return partitioned(d / "root.img", "gpt", ext(d / "root.fs", {"/etc/fstab": fstab}))


def _data(tmp_path: Path, *, table: bool = False) -> Path:
    fs = ext(tmp_path / "data.fs", {"/marker": "on the data disk\n"}, fs_uuid=DATA_UUID, root=False)
    return partitioned(tmp_path / "data.img", "gpt", fs) if table else fs


def _open(root: Path, *others: Disk) -> Any:
    return open_disks(
        [Disk("/dev/xvda", root.open("rb"), names=("/dev/sda", "/dev/xvda")), *others], description="machine"
    )


def _disk(path: Path, label: str = "/dev/sdb") -> Disk:
    return Disk(label, path.open("rb"), names=(label, label.replace("/dev/sd", "/dev/xvd")))


def _mounts(target: Any) -> dict[str, dict[str, Any]]:
    return {m["mountpoint"]: m for m in target.facts()["disk"]["mounts"]}


def test_a_mount_by_uuid_is_read_from_the_second_disk(tmp_path: Path) -> None:
    fstab = f"UUID={DATA_UUID} /srv/data ext4 defaults 0 2\ntmpfs /tmp tmpfs defaults 0 0\n"
    target = _open(_root(tmp_path, fstab), _disk(_data(tmp_path)))
    assert target.read_text("/srv/data/marker").text == "on the data disk\n"
    mounts = _mounts(target)
    assert mounts["/srv/data"]["status"] == "mounted" and mounts["/srv/data"]["volume"] == "/dev/sdb disk"
    assert mounts["/tmp"]["status"].startswith("tmpfs")
    assert [d["status"] for d in target.facts()["disk"]["disks"]] == ["read", "read"]


@pytest.mark.parametrize("spec", ["/dev/xvdb1", "/dev/sdb1"])
def test_a_mount_by_kernel_name_is_the_named_disk_and_partition(tmp_path: Path, spec: str) -> None:
    target = _open(
        _root(tmp_path, f"{spec} /srv/data ext4 defaults 0 2\n"), _disk(_data(tmp_path, table=True))
    )
    assert target.read_text("/srv/data/marker").text == "on the data disk\n"
    assert _mounts(target)["/srv/data"]["volume"] == "/dev/sdb partition 1"


def test_an_nvme_name_among_several_disks_is_inconclusive(tmp_path: Path) -> None:
    root = _root(tmp_path, "/dev/nvme1n1 /srv/data ext4 defaults 0 2\n")
    with pytest.raises(DiskImageError, match=r"/srv/data \(/dev/nvme1n1\) .*NVMe name cannot be matched"):
        _open(root, _disk(_data(tmp_path)))


def test_an_nvme_name_with_one_disk_is_that_disk(tmp_path: Path) -> None:
    target = _open(_root(tmp_path, "/dev/nvme0n1p1 / ext4 defaults 0 1\n/dev/nvme0n1p1 /again ext4 ro 0 0\n"))
    assert _mounts(target)["/again"]["status"] == "the root filesystem"


def test_a_mount_on_no_disk_is_inconclusive_unless_nofail(tmp_path: Path) -> None:
    missing = "UUID=11111111-2222-3333-4444-555555555555"
    with pytest.raises(DiskImageError, match=r"/srv/gone .* none of the machine's disks holds it"):
        _open(_root(tmp_path, f"{missing} /srv/gone ext4 defaults 0 2\n"))
    target = _open(
        _root(tmp_path, f"{missing} /srv/gone ext4 defaults,nofail 0 2\n/dev/sdk /srv/k ext4 nofail 0 0\n")
    )
    assert _mounts(target)["/srv/gone"]["status"].startswith("absent (nofail")
    assert _mounts(target)["/srv/k"]["status"].startswith("absent (nofail")


def test_a_mount_that_may_be_on_an_unreadable_disk_names_its_reason(tmp_path: Path) -> None:
    root = _root(tmp_path, f"UUID={DATA_UUID} /var ext4 defaults,nofail 0 2\n")
    unread = Disk("/dev/sdb (snap-1)", names=("/dev/sdb", "/dev/xvdb"), unreadable="access denied")
    with pytest.raises(DiskImageError) as caught:
        _open(root, unread)
    assert "/var (UUID=" in str(caught.value) and "/dev/sdb (snap-1) could not be read: access denied" in str(
        caught.value
    )


class _Failing(io.RawIOBase):
    """A disk whose every read fails, as a snapshot stream whose blocks are denied does."""

    size = 64 * 1024 * 1024

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return 0

    def tell(self) -> int:
        return 0

    def readinto(self, buffer: Any) -> int:
        raise OSError("snap-2: block 0: denied")


def test_a_disk_that_fails_to_read_is_unreadable_and_needed_mounts_stop_the_run(tmp_path: Path) -> None:
    failing = Disk("/dev/sdb (snap-2)", _Failing(), names=("/dev/sdb", "/dev/xvdb"))  # type: ignore[arg-type]
    with pytest.raises(
        DiskImageError, match=r"/srv/data \(/dev/xvdb\) .*could not be read: snap-2: block 0: denied"
    ):
        _open(_root(tmp_path, "/dev/xvdb /srv/data ext4 defaults 0 2\n"), failing)
    unneeded = Disk("/dev/sdb (snap-2)", _Failing(), names=("/dev/sdb",))  # type: ignore[arg-type]
    target = _open(_root(tmp_path, "# nothing else\n"), unneeded)
    disks = target.facts()["disk"]["disks"]
    assert disks[1]["status"] == "unreadable" and "denied" in disks[1]["reason"]


def test_a_blank_disk_is_recorded_not_read(tmp_path: Path) -> None:
    store = Disk("/dev/sdc (ephemeral0)", names=("/dev/sdc", "/dev/xvdc"), blank="instance store")
    target = _open(_root(tmp_path, "/dev/xvdc /mnt auto defaults 0 2\n"), store)
    assert _mounts(target)["/mnt"]["status"] == "on /dev/sdc (ephemeral0): instance store"
    assert target.facts()["disk"]["disks"][1] == {
        "disk": "/dev/sdc (ephemeral0)",
        "names": ["/dev/sdc", "/dev/xvdc"],
        "status": "blank",
        "reason": "instance store",
    }
