"""The bootable Debian 12 disk images of scripts/build-test-vm-image.sh, built once per machine and cached."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO, is_root, need

QEMU = "qemu-system-x86_64"


def _cache() -> Path:
    xdg_cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return Path(os.environ.get("IMAGELINT_TEST_CACHE", xdg_cache / "imagelint-tests"))


def cached_vm_image(variant: str) -> Path | None:
    """``vm-VARIANT.qcow2`` when it is built already (read-only uses that need not build it)."""
    image = _cache() / f"vm-{variant}.qcow2"
    return image if image.is_file() else None


def vm_image(variant: str) -> Path:
    """``vm-VARIANT.qcow2`` (clean, crashloop or nocloud), built under the script's lock when absent."""
    if cached_vm_image(variant) is None:
        need(is_root(), "building the bootable test disk image installs a kernel in a chroot: needs root")
        need(shutil.which("debootstrap") is not None, "debootstrap is not installed")
    script = REPO / "scripts" / "build-test-vm-image.sh"
    proc = subprocess.run(
        ["bash", str(script), "--variant", variant], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        pytest.fail(f"building the bootable test disk image ({variant}) failed:\n{proc.stderr[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def carve_root(disk: Path, out: Path) -> Path:
    """The first partition of the qcow2 ``disk`` (the test images' root) as a bare filesystem image
    ``out``: no partition table, no bootloader (raw by qemu-img, the table by sfdisk, the bytes by dd)."""
    need(shutil.which("sfdisk") is not None, "sfdisk is not installed (Debian: fdisk)")
    raw = out.with_suffix(".disk.raw")
    subprocess.run(["qemu-img", "convert", "-O", "raw", str(disk), str(raw)], check=True, capture_output=True)
    table = json.loads(subprocess.run(["sfdisk", "--json", str(raw)], check=True, capture_output=True).stdout)
    part = table["partitiontable"]["partitions"][0]
    sector = int(table["partitiontable"].get("sectorsize", 512))
    subprocess.run(
        [
            "dd", f"if={raw}", f"of={out}", "bs=1M", "iflag=skip_bytes,count_bytes", "conv=sparse",
            f"skip={int(part['start']) * sector}", f"count={int(part['size']) * sector}", "status=none",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    raw.unlink()
    return out


def need_qemu() -> None:
    need(shutil.which(QEMU) is not None, f"{QEMU} is not installed (Debian: qemu-system-x86)")
    need(shutil.which("qemu-img") is not None, "qemu-img is not installed (Debian: qemu-utils)")
    need(shutil.which("genisoimage") is not None, "genisoimage is not installed")
    need(shutil.which("ssh-keygen") is not None, "ssh-keygen is not installed (Debian: openssh-client)")


@pytest.fixture(scope="session")
def crashloop_vm_image() -> Path:
    need_qemu()
    return vm_image("crashloop")
