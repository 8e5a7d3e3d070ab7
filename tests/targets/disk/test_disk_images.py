"""Disk images of the real Debian rootfs (faulty sample planted) audit exactly like the directory tree.

For every layout (ext4 and XFS, bare, in GPT with an EFI partition, in MBR, in LVM, /var on its own
partition mounted through fstab) and container (raw, qcow2, compressed qcow2, streamOptimized vmdk,
vhdx), the findings (rule, subject, message) and ``imagelint units --format json`` equal the
directory's. The XFS images and the qcow2 are also read by an unprivileged user (``runuser -u nobody``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

import pytest

from tests.support import is_root, need, run_cli
from tests.targets.disk import images

pytestmark = pytest.mark.slow


def _findings(report: dict) -> set[tuple[str, str, str]]:
    return {(f["rule_id"], f.get("subject") or "", f["message"]) for f in report["findings"]}


def _audit(path: Path, *extra: str) -> dict:
    proc = run_cli("audit", str(path), "--format", "json", *extra, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _units(path: Path) -> list[dict]:
    proc = run_cli("units", str(path), "--format", "json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["units"]


@cache
def _expected(tree: str) -> tuple[frozenset[tuple[str, str, str]], str, str, str]:
    report = _audit(Path(tree))
    units = json.dumps(_units(Path(tree)), sort_keys=True)
    return (
        frozenset(_findings(report)),
        units,
        report["verdict"],
        json.dumps(report["inventory"], sort_keys=True),
    )


def _need_tools(*tools: str) -> None:
    for tool in tools:
        need(shutil.which(tool) is not None, f"{tool} is not installed (scripts/install.sh --test)")


def _image(debian_rootfs: Path, name: str) -> Path:
    fs_ext4 = lambda: images.ext4_fs(debian_rootfs)  # noqa: E731
    fs_xfs = lambda: images.xfs_fs(debian_rootfs)  # noqa: E731
    gpt_ext4 = lambda: images.cached("gpt-ext4.raw", lambda out: images.gpt(fs_ext4(), out))  # noqa: E731
    builders = {
        "ext4": fs_ext4,
        "gpt-ext4": gpt_ext4,
        "mbr-ext4": lambda: images.cached("mbr-ext4.raw", lambda out: images.mbr(fs_ext4(), out)),
        "xfs": fs_xfs,
        "gpt-xfs": lambda: images.cached("gpt-xfs.raw", lambda out: images.gpt(fs_xfs(), out)),
        "lvm-ext4": lambda: images.cached("lvm-ext4.raw", lambda out: images.lvm(fs_ext4(), out)),
        "var-split": lambda: images.cached(
            "var-split.raw", lambda out: images.separate_var(debian_rootfs, out)
        ),
        "qcow2": lambda: images.cached(
            "gpt-ext4.qcow2", lambda out: images.convert(gpt_ext4(), out, "qcow2")
        ),
        "qcow2-compressed": lambda: images.cached(
            "gpt-ext4.c.qcow2", lambda out: images.convert(gpt_ext4(), out, "qcow2", "-c")
        ),
        "vmdk": lambda: images.cached(
            "gpt-ext4.vmdk",
            lambda out: images.convert(gpt_ext4(), out, "vmdk", "-o", "subformat=streamOptimized"),
        ),
        "vhdx": lambda: images.cached("gpt-ext4.vhdx", lambda out: images.convert(gpt_ext4(), out, "vhdx")),
    }
    return builders[name]()


ROOT_ONLY = {"xfs", "gpt-xfs", "lvm-ext4"}
LAYOUTS = ["ext4", "gpt-ext4", "mbr-ext4", "xfs", "gpt-xfs", "lvm-ext4", "var-split"]
CONTAINERS = ["qcow2", "qcow2-compressed", "vmdk", "vhdx"]


@pytest.mark.parametrize("name", LAYOUTS + CONTAINERS)
def test_a_disk_image_audits_and_lists_units_like_its_directory_tree(debian_rootfs: Path, name: str) -> None:
    _need_tools("mke2fs", "sfdisk", "mkfs.vfat", "qemu-img")
    if name in ROOT_ONLY:
        need(is_root(), f"building the {name} image needs root (loop devices)")
        _need_tools("mkfs.xfs", "pvcreate", "losetup")
    tree = images.sample_tree(debian_rootfs)
    image = _image(debian_rootfs, name)
    findings, units, verdict, inventory = _expected(str(tree))
    report = _audit(image)
    assert report["errors"] == []
    assert _findings(report) == findings
    assert (report["verdict"], json.dumps(report["inventory"], sort_keys=True)) == (verdict, inventory)
    assert report["target"] == {"kind": "disk", "path": str(image)}
    disk = report["facts"]["disk"]
    assert disk["root"]["filesystem"] == ("xfs" if "xfs" in name else "ext4")
    assert disk["container"] == {"qcow2": "qcow2", "qcow2-compressed": "qcow2"}.get(
        name, name if name in CONTAINERS else "raw"
    )
    if name == "var-split":
        assert {"mountpoint": "/var", "device": f"UUID={images.VAR_UUID}", "status": "mounted",
                "volume": "partition 3", "filesystem": "ext4"} in disk["mounts"]  # fmt: skip
    assert json.dumps(_units(image), sort_keys=True) == units
    same = run_cli("diff", str(tree), str(image), "-f", "json", timeout=300)  # the same image, two doors
    assert (same.returncode, json.loads(same.stdout)["changes"]) == (0, []), same.stderr


def test_the_separate_var_is_really_needed(debian_rootfs: Path) -> None:
    """Without its fstab mount the split image would miss /var's findings: the mount is what shows them."""
    _need_tools("mke2fs", "sfdisk", "mkfs.vfat")
    image = _image(debian_rootfs, "var-split")
    findings = _expected(str(images.sample_tree(debian_rootfs)))[0]
    var_findings = {f for f in findings if "/var/" in f[1] or "/var/" in f[2]}
    assert var_findings, "the sample plants files under /var"
    assert var_findings <= _findings(_audit(image))


def _runuser() -> str:
    exe = shutil.which("runuser")
    need(exe is not None, "runuser is not installed")
    return str(exe)


def _nobody_command() -> tuple[list[str], dict[str, str]]:
    """How nobody runs this imagelint: the venv's script, or (when the venv's interpreter lives in
    root's home) the system Python of the same version with the worktree and the venv's packages."""
    env = {"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "HOME": "/nonexistent"}
    exe = Path(sys.executable).parent / "imagelint"
    probe = subprocess.run(
        ["runuser", "-u", "nobody", "--", str(exe), "--version"], capture_output=True, check=False
    )
    if probe.returncode == 0:
        return [str(exe)], env
    system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    need(Path(system).exists(), f"nobody cannot run {exe} and {system} is missing")
    import imagelint

    site = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_relative_to(sys.prefix))
    env["PYTHONPATH"] = f"{Path(imagelint.__file__).parent.parent}:{site}"
    return [
        system,
        "-c",
        "import sys; from imagelint.cli import main; sys.argv[0] = 'imagelint'; main()",
    ], env


def _public_copy(image: Path) -> Path:
    """A copy an unprivileged user can read (the cache lives under root's home)."""
    d = Path(tempfile.mkdtemp(prefix="imagelint-nobody-"))
    os.chmod(d, 0o755)
    copy = d / image.name
    subprocess.run(["cp", "--sparse=always", str(image), str(copy)], check=True)
    os.chmod(copy, 0o444)
    return copy


@pytest.mark.parametrize("name", ["gpt-xfs", "qcow2"])
def test_an_unprivileged_user_audits_an_image_file(debian_rootfs: Path, name: str) -> None:
    need(is_root(), "runuser needs root")
    _need_tools("runuser", "mkfs.xfs", "qemu-img")
    command, env = _nobody_command()
    copy = _public_copy(_image(debian_rootfs, name))
    try:
        proc = subprocess.run(
            [_runuser(), "-u", "nobody", "--", *command, "audit", str(copy), "--format", "json"],
            capture_output=True, text=True, check=False, timeout=300, cwd="/", env=env,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr
        findings = _expected(str(images.sample_tree(debian_rootfs)))[0]
        assert _findings(json.loads(proc.stdout)) == findings
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)
