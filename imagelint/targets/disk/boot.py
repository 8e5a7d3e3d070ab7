"""How a raw disk says it boots: its partition table's EFI System and BIOS boot partitions, and code
in its MBR.

A firmware boots a disk one of two ways. BIOS runs the code in the MBR's first 440 bytes (GRUB's
``boot.img``; on GPT its core image lives in a *BIOS boot partition*). UEFI reads a FAT *EFI System
Partition* (ESP) for its loader and ignores the MBR's code. A disk with an ESP and neither boot code
nor a BIOS boot partition boots under UEFI only; anything else has a BIOS path. The table is checked
by :mod:`.tables` before dissect.volume reads it, as every other read of it is.
"""

from __future__ import annotations

from typing import Any, BinaryIO
from uuid import UUID

from imagelint.records import dataclass
from imagelint.targets.disk.errors import DiskImageError
from imagelint.targets.disk.probe import read_at, stream_size
from imagelint.targets.disk.tables import check_partition_table

ESP = UUID("c12a7328-f81f-11d2-ba4b-00a0c93ec93b")  # EFI System Partition (GPT type)
BIOS_BOOT = UUID("21686148-6449-6e6f-744e-656564454649")  # BIOS boot partition (GPT type, "Hah!IdontNeedEFI")
MBR_ESP = 0xEF  # an EFI System Partition in an MBR entry (a hybrid MBR's too)
MBR_CODE = 440  # bytes of boot code before the disk signature
MAX_PARTITIONS = 256


@dataclass(frozen=True)
class BootLayout:
    table: str  # "gpt", "mbr" or "none"
    esp: bool  # an EFI System Partition
    bios_boot: bool  # a BIOS boot partition (GPT)
    mbr_code: bool  # anything but zeros in the MBR's boot code area

    @property
    def uefi_only(self) -> bool:
        return self.table == "gpt" and self.esp and not self.bios_boot and not self.mbr_code


def boot_layout(disk: BinaryIO, where: str) -> BootLayout:
    """The boot layout of a raw disk; a :class:`DiskImageError` when its table is corrupt."""
    mbr = read_at(disk, 0, 512)
    code = any(mbr[:MBR_CODE])
    kind = check_partition_table(disk, stream_size(disk), where)
    if kind is None:
        return BootLayout("none", False, False, code)
    from dissect.volume.disk.schemes import GPT, MBR

    try:
        disk.seek(0)
        scheme: Any = GPT(disk) if kind == "gpt" else MBR(disk)
        types = [part.type for part in list(scheme.partitions)[:MAX_PARTITIONS] if part.size]
    except Exception as exc:
        raise DiskImageError(
            f"corrupt {kind.upper()} partition table ({type(exc).__name__}: {exc})", where=where
        ) from None
    return BootLayout(kind, ESP in types or MBR_ESP in types, BIOS_BOOT in types, code)
