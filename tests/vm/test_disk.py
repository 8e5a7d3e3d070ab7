"""The image's format from the real ``qemu-img``, refusals of images that name other files, the overlay."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from imagelint.vm import VmError
from imagelint.vm.disk import allocated, create_overlay, image_format
from tests.vm.conftest import need_qemu


def make(path: Path, fmt: str, *extra: str) -> Path:
    subprocess.run(["qemu-img", "create", "-q", "-f", fmt, *extra, str(path), "16M"], check=True)
    return path


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [("raw", "raw"), ("qcow2", "qcow2"), ("vmdk", "vmdk"), ("vpc", "vpc"), ("vhdx", "vhdx")],
)
def test_every_format_the_openers_read_is_booted(tmp_path: Path, fmt: str, expected: str) -> None:
    need_qemu()
    assert image_format(make(tmp_path / f"disk.{fmt}", fmt)) == expected


def test_an_image_with_a_backing_file_is_refused(tmp_path: Path) -> None:
    need_qemu()
    base = make(tmp_path / "base.qcow2", "qcow2")
    child = make(tmp_path / "child.qcow2", "qcow2", "-b", str(base), "-F", "qcow2")
    with pytest.raises(VmError, match="backing file"):
        image_format(child)


def test_a_vmdk_whose_extents_are_elsewhere_is_refused(tmp_path: Path) -> None:
    need_qemu()
    make(tmp_path / "split.vmdk", "vmdk", "-o", "subformat=twoGbMaxExtentSparse")
    with pytest.raises(VmError, match="extents"):
        image_format(tmp_path / "split.vmdk")


def test_a_format_not_booted_is_one_line(tmp_path: Path) -> None:
    need_qemu()
    with pytest.raises(VmError, match="is not booted"):
        image_format(make(tmp_path / "disk.qed", "qed"))


def test_the_guests_writes_land_in_the_overlay_never_in_the_image(tmp_path: Path) -> None:
    need_qemu()
    image = make(tmp_path / "disk.raw", "raw")
    before = hashlib.sha256(image.read_bytes()).hexdigest()
    overlay = tmp_path / "overlay.qcow2"
    create_overlay(image, "raw", overlay)
    grown = allocated(overlay)
    subprocess.run(
        ["qemu-io", "-f", "qcow2", "-c", "write -P 0xab 0 4M", str(overlay)], check=True, capture_output=True
    )
    assert hashlib.sha256(image.read_bytes()).hexdigest() == before
    assert allocated(overlay) >= grown + (4 << 20)
