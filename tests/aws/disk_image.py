"""A partitioned disk image of a real tree, as AMIs are laid out: GPT with an EFI system partition
(FAT) and an ext4 root filesystem made with ``mke2fs -d`` (no root, no loop device, no mount)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import yaml

from imagelint.sampletree import build_tree

REPO = Path(__file__).resolve().parent.parent.parent

MIB = 1024 * 1024
SECTOR = 512
EFI_START, EFI_MIB = 1 * MIB, 32
ROOT_START, ROOT_MIB = EFI_START + EFI_MIB * MIB, 600
DISK_MIB = 640  # room for the backup GPT after the root partition
ESP = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
LINUX = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"


def gpt_ext4_image(tree: Path, dest: Path) -> Path:
    """``dest``: a sparse raw disk; partition 1 the ESP, partition 2 ext4 holding ``tree``."""
    with dest.open("wb") as f:
        f.truncate(DISK_MIB * MIB)
    table = (
        "label: gpt\n"
        f"start={EFI_START // SECTOR}, size={EFI_MIB * MIB // SECTOR}, type={ESP}, name=EFI\n"
        f"start={ROOT_START // SECTOR}, size={ROOT_MIB * MIB // SECTOR}, type={LINUX}, name=root\n"
    )
    _run(["sfdisk", "--quiet", str(dest)], table)
    _run(
        [
            "mkfs.vfat",
            "-F",
            "16",
            "--offset",
            str(EFI_START // SECTOR),
            "-n",
            "EFI",
            str(dest),
            str(EFI_MIB * 1024),
        ]
    )
    _run(
        [
            "mke2fs",
            "-q",
            "-F",
            "-t",
            "ext4",
            "-L",
            "root",
            "-d",
            str(tree),
            "-E",
            f"offset={ROOT_START}",
            str(dest),
            f"{ROOT_MIB}M",
        ]
    )
    return dest


VAR_UUID = "5e1f0d3c-6a7b-4c8d-9e0f-1a2b3c4d5e6f"
VAR_MIB = 256
SPLIT_VERSION = "1"  # bump when the layout below changes: the cached disks are rebuilt


def split_var_images(tree: Path) -> tuple[Path, Path]:
    """(root disk, /var disk) of ``tree`` laid out as a CIS-style AMI, built once per machine and
    cached (:func:`tests.targets.disk.images.cached`): the GPT root disk of :func:`gpt_ext4_image`
    with an empty ``/var`` and an fstab mounting ``/var`` by UUID from a second disk, and that disk,
    an unpartitioned ext4 volume holding ``tree``'s ``/var`` (``mke2fs -d``, no root)."""
    from tests.targets.disk.images import cached

    def build(dest: Path, part: str) -> None:
        with tempfile.TemporaryDirectory(prefix="imagelint-split-", dir=dest.parent) as scratch:
            root_tree, var_tree = _split_var(tree, Path(scratch))
            if part == "root":
                gpt_ext4_image(root_tree, dest)
                return
            _run(
                [
                    "mke2fs", "-q", "-F", "-t", "ext4", "-L", "var", "-U", VAR_UUID,
                    "-d", str(var_tree), str(dest), f"{VAR_MIB}M",
                ]
            )  # fmt: skip

    return (
        cached(f"split-root-{SPLIT_VERSION}.img", lambda dest: build(dest, "root")),
        cached(f"split-var-{SPLIT_VERSION}.img", lambda dest: build(dest, "var")),
    )


def _split_var(tree: Path, work: Path) -> tuple[Path, Path]:
    """A copy of ``tree`` whose /var is empty and mounted by fstab from a volume, and that /var."""
    root_tree = work / "root-tree"
    _run(["cp", "-a", "--reflink=auto", str(tree), str(root_tree)])
    var_tree = work / "var-tree"
    (root_tree / "var").rename(var_tree)
    (root_tree / "var").mkdir(mode=0o755)
    fstab = root_tree / "etc" / "fstab"
    if fstab.is_symlink():
        fstab.unlink()
    fstab.write_text(
        "# CIS: /var on its own volume\nLABEL=root / ext4 defaults 0 1\n"
        f"UUID={VAR_UUID} /var ext4 defaults,nodev 0 2\ntmpfs /tmp tmpfs nosuid,nodev 0 0\n",
        encoding="utf-8",
    )
    return root_tree, var_tree


UNIT = "vendor-agent.service"
PACKAGE = "vendor-agent"
VENDOR_FILES: dict[str, object] = {  # a vendor's agent, installed and not enabled
    f"/usr/lib/systemd/system/{UNIT}": "[Unit]\nDescription=Vendor agent\n\n[Service]\n"
    "ExecStart=/usr/bin/vendor-agent\nRestart=on-failure\n\n[Install]\nWantedBy=multi-user.target\n",
    "/usr/bin/vendor-agent": {"content": "#!/bin/sh\nexit 0\n", "mode": "0755"},
}


def vendor_update(disk: Path, dest: Path, tree: Path, work: Path) -> Path:
    """``dest``: a copy of ``disk`` (made from ``tree``) with a vendor update applied to its root
    filesystem in place by ``debugfs -w``, as an update applied to a volume changes it (the blocks it
    did not touch stay byte for byte what they were): the agent enabled at boot, its package added
    to ``/var/lib/dpkg/status``."""
    status = work / "status"
    added = f"Package: {PACKAGE}\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.1.0-1\n\n"
    status.write_text((tree / "var/lib/dpkg/status").read_text(encoding="utf-8") + added, encoding="utf-8")
    commands = [
        "rm /var/lib/dpkg/status",
        f"write {status} /var/lib/dpkg/status",
        "sif /var/lib/dpkg/status uid 0",
        "sif /var/lib/dpkg/status gid 0",
        f"symlink /etc/systemd/system/multi-user.target.wants/{UNIT} /usr/lib/systemd/system/{UNIT}",
    ]
    _run(["cp", "--sparse=always", str(disk), str(dest)])
    _run(["debugfs", "-w", "-f", "-", f"{dest}?offset={ROOT_START}"], "\n".join(commands) + "\n")
    return dest


def plant_sample_faults(tree: Path) -> Path:
    """Plant the sample image's faults (examples/sample-image.yaml) into a private copy of a tree: the
    ECS agent enabled without a cluster, baked machine-id and host keys, credentials, ..."""
    spec = yaml.safe_load((REPO / "examples" / "sample-image.yaml").read_text(encoding="utf-8"))
    for image_path in spec["files"]:
        planted = tree / image_path.lstrip("/")
        if planted.is_symlink() or planted.is_file():
            planted.unlink()  # replace, never write through a link
    return build_tree(tree, spec["files"])


def _run(command: list[str], stdin: str | None = None) -> None:
    proc = subprocess.run(command, input=stdin, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {proc.stderr.strip()}")
