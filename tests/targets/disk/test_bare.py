"""A bare filesystem image (the root filesystem is the whole disk, no partition table) is told apart
from a partitioned disk by the disk opener itself: what `vm check` boots by its kernel directly."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from imagelint.targets.disk import open_disk_file
from imagelint.targets.disk.open import BareFilesystem
from tests.support import need
from tests.targets.disk import small_images

UUID = "0b6f2c44-8a7e-4c1b-9d2e-5f3a1c7e9b80"


@pytest.fixture
def fs(tmp_path: Path) -> Path:
    need(shutil.which("mke2fs") is not None, "mke2fs is not installed (Debian: e2fsprogs)")
    return small_images.ext(tmp_path / "root.ext4", fs_uuid=UUID)


def test_a_whole_disk_filesystem_is_bare_with_its_type_and_uuid(fs: Path) -> None:
    assert open_disk_file(fs).bare == BareFilesystem("ext4", UUID)


def test_a_bare_filesystem_in_a_qcow2_container_is_bare_too(fs: Path, tmp_path: Path) -> None:
    need(shutil.which("qemu-img") is not None, "qemu-img is not installed (Debian: qemu-utils)")
    image = small_images.convert(fs, tmp_path / "root.qcow2", "qcow2")
    assert open_disk_file(image).bare == BareFilesystem("ext4", UUID)


@pytest.mark.parametrize("label", ["gpt", "dos"])
def test_a_partitioned_disk_is_not_bare(fs: Path, tmp_path: Path, label: str) -> None:
    need(shutil.which("sfdisk") is not None, "sfdisk is not installed (Debian: fdisk)")
    target = open_disk_file(small_images.partitioned(tmp_path / "disk.raw", label, fs))
    assert target.facts()["disk"]["root"]["partition"] == 1  # the same filesystem, found in the table
    assert target.bare is None
