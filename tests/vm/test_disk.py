"""The image's format from the real ``qemu-img``, refusals of images that name other files, the overlay."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from imagelint.vm import VmError
from imagelint.vm.disk import allocated, choose_firmware, create_overlay, image_format
from tests.support import need
from tests.targets.disk.test_boot import gpt, with_boot_code
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


@pytest.mark.parametrize("fmt", ["qcow2", "vmdk", "vhdx"])
def test_auto_firmware_reads_the_table_inside_the_container(tmp_path: Path, fmt: str) -> None:
    need_qemu()
    raw = gpt(tmp_path, "ef00", "8300")
    image = tmp_path / f"esp.{fmt}"
    subprocess.run(["qemu-img", "convert", "-q", "-O", fmt, str(raw), str(image)], check=True)
    firmware, why = choose_firmware(image)
    assert firmware == "uefi", why
    assert why == "GPT with an EFI System Partition, no BIOS boot partition and no MBR boot code"


def test_auto_firmware_is_bios_for_any_bios_path_and_says_which(tmp_path: Path) -> None:
    assert choose_firmware(gpt(tmp_path, "ef02", "ef00", name="hybrid.raw")) == (
        "bios",
        "GPT with an EFI System Partition and a BIOS boot partition",
    )
    assert choose_firmware(with_boot_code(gpt(tmp_path, "ef00", name="grub.raw"))) == (
        "bios",
        "GPT with an EFI System Partition and boot code in the MBR",
    )
    blank = tmp_path / "blank.raw"
    blank.write_bytes(bytes(1 << 20))
    assert choose_firmware(blank) == ("bios", "no partition table, no EFI System Partition")


def test_auto_firmware_on_a_table_it_cannot_read_is_bios_with_the_reason(tmp_path: Path) -> None:
    disk = gpt(tmp_path, "ef00")
    with disk.open("r+b") as out:
        out.seek(512 + 80)  # the GPT header's entry count
        out.write(b"\xff\xff\xff\xff")
    firmware, why = choose_firmware(disk)
    assert firmware == "bios" and why.startswith("the partition table could not be read (corrupt GPT")


def test_the_test_images_grub_on_the_mbr_is_bios(tmp_path: Path) -> None:
    from tests.vm.conftest import cached_vm_image

    image = cached_vm_image("crashloop")
    need(image is not None, "the crashloop test VM image is not built (scripts/build-test-vm-image.sh)")
    assert image is not None
    assert choose_firmware(image) == ("bios", "MBR partition table with boot code in the MBR")
