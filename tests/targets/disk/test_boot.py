"""How a disk boots, read from partition tables the real partitioners wrote (sgdisk, sfdisk)."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from imagelint.targets.disk.boot import BootLayout, boot_layout
from imagelint.targets.disk.errors import DiskImageError
from imagelint.targets.disk.open import raw_disk
from tests.support import need

SIZE = 64 << 20


def gpt(tmp_path: Path, *types: str, name: str = "gpt.raw") -> Path:
    """A blank disk with a GPT of one small partition per sgdisk type code (ef00 ESP, ef02 BIOS boot)."""
    need(shutil.which("sgdisk") is not None, "sgdisk is not installed (Debian: gdisk)")
    disk = tmp_path / name
    with disk.open("wb") as out:
        out.truncate(SIZE)
    args = [f"--new={n}:0:+8M --typecode={n}:{code}" for n, code in enumerate(types, 1)]
    subprocess.run(["sgdisk", *" ".join(args).split(), str(disk)], check=True, capture_output=True)
    return disk


def mbr(tmp_path: Path, script: str) -> Path:
    need(shutil.which("sfdisk") is not None, "sfdisk is not installed (Debian: fdisk)")
    disk = tmp_path / "mbr.raw"
    with disk.open("wb") as out:
        out.truncate(SIZE)
    subprocess.run(["sfdisk", "-q", str(disk)], input=f"label: dos\n{script}", text=True, check=True)
    return disk


def with_boot_code(disk: Path) -> Path:
    """What grub-install does to the MBR: code in its first 440 bytes (here a jump and a halt)."""
    with disk.open("r+b") as out:
        out.write(b"\xeb\x63\x90" + b"\xf4" * 16)
    return disk


def layout(disk: Path) -> BootLayout:
    with raw_disk(disk) as stream:
        return boot_layout(stream, str(disk))


def test_a_gpt_with_an_efi_system_partition_alone_boots_under_uefi_only(tmp_path: Path) -> None:
    got = layout(gpt(tmp_path, "ef00", "8300"))
    assert got == BootLayout("gpt", esp=True, bios_boot=False, mbr_code=False) and got.uefi_only


@pytest.mark.parametrize(
    ("types", "code", "expected"),
    [
        (("ef02", "ef00", "8300"), False, BootLayout("gpt", True, True, False)),  # hybrid: both paths
        (("ef00", "8300"), True, BootLayout("gpt", True, False, True)),  # GRUB in the MBR too
        (("8300",), False, BootLayout("gpt", False, False, False)),  # nothing to boot from under UEFI
    ],
)
def test_a_gpt_with_a_bios_path_or_no_esp_is_not_uefi_only(
    tmp_path: Path, types: tuple[str, ...], code: bool, expected: BootLayout
) -> None:
    disk = gpt(tmp_path, *types)
    got = layout(with_boot_code(disk) if code else disk)
    assert got == expected and not got.uefi_only


def test_an_mbr_disk_is_never_uefi_only_even_with_an_esp(tmp_path: Path) -> None:
    got = layout(mbr(tmp_path, "size=16M, type=ef\nsize=16M, type=83\n"))
    assert got == BootLayout("mbr", esp=True, bios_boot=False, mbr_code=False) and not got.uefi_only


def test_a_disk_with_no_table_is_none(tmp_path: Path) -> None:
    disk = tmp_path / "blank.raw"
    disk.write_bytes(bytes(SIZE))
    assert layout(disk) == BootLayout("none", False, False, False)


def test_a_gpt_claiming_a_billion_entries_is_corrupt_not_read(tmp_path: Path) -> None:
    disk = gpt(tmp_path, "ef00")
    with disk.open("r+b") as out:
        out.seek(512 + 80)  # the header's partition entry count
        out.write(struct.pack("<I", 0xFFFFFFFF))
    with pytest.raises(DiskImageError, match="GPT"):
        layout(disk)
