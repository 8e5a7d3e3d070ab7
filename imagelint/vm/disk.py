"""The image's format, read by ``qemu-img info``, and the overlay the machine writes instead of it.

The image is hostile input: ``qemu-img info`` runs with a time and memory limit and its answer is
bounded; only the formats imagelint's disk openers read are booted (raw, qcow2, vmdk, vpc/VHD, vhdx),
and an image that refers to another file (a qcow2 backing file, a VMDK extent elsewhere) is refused:
no file is opened that the user did not name. The overlay is a qcow2 file whose backing file is the
image with its format given (``-b IMAGE -F FORMAT``), so QEMU opens the image read-only and every
guest write lands in the overlay, in the machine's private scratch directory.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

from imagelint.vm import VmError

FORMATS = ("raw", "qcow2", "vmdk", "vpc", "vhdx")
INFO_TIMEOUT = 60.0
INFO_MAX = 1 << 20  # bytes of qemu-img's JSON answer read
INFO_MEMORY = 1 << 30  # address space qemu-img info may use
SELF_CONTAINED = "only a self-contained image is booted"


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (INFO_MEMORY, INFO_MEMORY))


def image_format(image: Path) -> str:
    """The format of ``image``; a :class:`VmError` (inconclusive) naming why it cannot be booted."""
    where = str(image)
    if not image.is_file():
        raise VmError("no such file (a disk image file is booted)", where=where)
    try:
        done = subprocess.run(
            ["qemu-img", "info", "--output=json", "--", str(image)],
            capture_output=True,
            timeout=INFO_TIMEOUT,
            preexec_fn=_limits,  # a limit on the child only
            check=False,
        )
    except FileNotFoundError:
        raise VmError("qemu-img is not installed (Debian: qemu-utils)", where=where) from None
    except subprocess.TimeoutExpired:
        raise VmError(f"qemu-img info did not answer within {INFO_TIMEOUT:.0f} s", where=where) from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        reason = said[-1] if said else "qemu-img failed"
        raise VmError(f"not a disk image qemu can read: {reason}", where=where)
    try:
        info = json.loads(done.stdout[:INFO_MAX])
    except ValueError:
        raise VmError("qemu-img info answered something that is not JSON", where=where) from None
    fmt = info.get("format") if isinstance(info, dict) else None
    if fmt not in FORMATS:
        raise VmError(f"format {str(fmt)[:40]!r} is not booted (raw, qcow2, vmdk, vhd, vhdx)", where=where)
    if info.get("backing-filename") or info.get("full-backing-filename"):
        raise VmError(f"the image names a backing file; {SELF_CONTAINED}", where=where)
    if ((info.get("format-specific") or {}).get("data") or {}).get("data-file"):
        raise VmError(f"the image keeps its data in another file; {SELF_CONTAINED}", where=where)
    if fmt == "vmdk":
        extents = (info.get("format-specific") or {}).get("data", {}).get("extents", [])
        own = os.path.realpath(image)
        if any(os.path.realpath(str(e.get("filename", ""))) != own for e in extents if isinstance(e, dict)):
            raise VmError(f"the VMDK's extents are in other files; {SELF_CONTAINED}", where=where)
    return str(fmt)


def create_overlay(image: Path, fmt: str, overlay: Path) -> None:
    """A qcow2 ``overlay`` on ``image`` (read-only under it)."""
    done = subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(image.resolve()), "-F", fmt, str(overlay)],
        capture_output=True,
        timeout=INFO_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise VmError(f"cannot make the overlay: {said[-1] if said else 'qemu-img failed'}", where=str(image))


def allocated(path: Path) -> int:
    """Bytes the file holds on disk (its growth is what the cap bounds)."""
    try:
        return os.stat(path).st_blocks * 512
    except OSError:
        return 0


def choose_firmware(image: Path) -> tuple[str, str]:
    """``("uefi" | "bios", why)`` for ``--firmware auto``, from the image's partition table read
    through the disk readers (:mod:`imagelint.targets.disk.boot`): a GPT disk with an EFI System
    Partition and neither a BIOS boot partition nor MBR boot code boots under UEFI only (OVMF);
    anything else has a BIOS path (SeaBIOS), which is also the choice when the table cannot be read."""
    from imagelint.errors import ImageLintError
    from imagelint.targets.disk.boot import boot_layout
    from imagelint.targets.disk.open import raw_disk

    try:
        with raw_disk(image) as disk:
            layout = boot_layout(disk, str(image))
    except ImageLintError as exc:
        return "bios", f"the partition table could not be read ({exc.message}): BIOS, the default"
    if layout.uefi_only:
        return "uefi", "GPT with an EFI System Partition, no BIOS boot partition and no MBR boot code"
    have = [
        *(["an EFI System Partition"] if layout.esp else []),
        *(["a BIOS boot partition"] if layout.bios_boot else []),
        *(["boot code in the MBR"] if layout.mbr_code else []),
    ]
    table = {"gpt": "GPT", "mbr": "MBR partition table", "none": "no partition table"}[layout.table]
    return "bios", f"{table} with {' and '.join(have)}" if have else f"{table}, no EFI System Partition"
