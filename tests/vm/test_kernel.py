"""The direct kernel boot of a bare filesystem image: the kernel and initrd its /boot offers, read from
real ext4 images (mke2fs -d) through the disk opener, links resolved inside the image, bounded."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from imagelint.targets.disk import open_disk_file
from imagelint.targets.disk.open import BareFilesystem, DiskTarget
from imagelint.vm import VmError, kernel
from imagelint.vm.kernel import NO_KERNEL, plan, version_key
from imagelint.vm.machine import MachineSpec, qemu_argv, resolve_firmware
from tests.support import need, os_root

UUID = "2f1c7a5e-5d0b-4f7e-9a51-0c3d1e2b4a60"
OLD, NEW = "6.1.0-9-cloud-amd64", "6.1.0-10-cloud-amd64"


def kernels(*versions: str, initrd: bool = True) -> dict[str, object]:
    """/boot/vmlinuz-V (content 'kernel V') and, with ``initrd``, /boot/initrd.img-V."""
    files: dict[str, object] = {f"/boot/vmlinuz-{v}": f"kernel {v}" for v in versions}
    if initrd:
        files.update({f"/boot/initrd.img-{v}": f"initrd {v}" for v in versions})
    return files


def bare_ext4(tmp_path: Path, entries: dict[str, object], name: str = "bare.ext4") -> Path:
    """A bare ext4 filesystem image (no partition table) of an OS root holding ``entries``."""
    need(shutil.which("mke2fs") is not None, "mke2fs is not installed (Debian: e2fsprogs)")
    tree = os_root(tmp_path / f"{name}.tree", {"/etc/shadow": "root:image-shadow:19000::::::\n", **entries})
    image = tmp_path / name
    subprocess.run(
        ["mke2fs", "-q", "-F", "-t", "ext4", "-U", UUID, "-d", str(tree), str(image), "16M"],
        check=True,
        capture_output=True,
    )
    return image


def opened(image: Path) -> DiskTarget:
    target = open_disk_file(image)
    assert target.bare == BareFilesystem("ext4", UUID)  # found by the disk opener, not read again
    return target


def test_versions_compare_by_their_numbers() -> None:
    assert sorted([NEW, OLD, "6.1.0-9-rt-amd64"], key=version_key)[-1] == NEW


def test_the_newest_kernel_is_booted_with_its_initrd_by_uuid(tmp_path: Path) -> None:
    target = opened(bare_ext4(tmp_path, kernels(OLD, NEW)))
    boot = plan(target, UUID, "bare.ext4")
    assert (boot.kernel, boot.initrd, boot.kernel_name) == (
        f"/boot/vmlinuz-{NEW}",
        f"/boot/initrd.img-{NEW}",
        f"vmlinuz-{NEW}",
    )
    assert boot.append() == f"root=UUID={UUID} rw console=ttyS0,115200"
    assert (
        boot.why
        == f"no partition table, a bare filesystem: vmlinuz-{NEW}, the newest kernel in /boot with an initrd"
    )
    assert boot.facts()["boot"] == "direct-kernel"


def test_qemu_loads_the_staged_kernel_not_a_bootloader(tmp_path: Path) -> None:
    """-kernel/-initrd name the copies in the scratch directory, -append the command line; SeaBIOS
    (no OVMF, whatever the partition table would have said: there is none)."""
    target = opened(bare_ext4(tmp_path, kernels(NEW)))
    boot = plan(target, UUID, "bare.ext4")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    spec, why = resolve_firmware(MachineSpec(image=tmp_path / "bare.ext4", direct=boot))
    assert spec.firmware == "bios" and why.startswith("direct kernel boot (no partition table")
    argv = qemu_argv(spec, "tcg", scratch, 2200, "ssh-ed25519 AAAA x")
    assert argv[argv.index("-kernel") + 1] == str(scratch / "kernel")
    assert argv[argv.index("-initrd") + 1] == str(scratch / "initrd")
    assert argv[argv.index("-append") + 1] == f"root=UUID={UUID} rw console=ttyS0,115200"
    assert "-bios" not in argv and argv[argv.index("-machine") + 1] == "pc"
    assert f"file={scratch / 'overlay.qcow2'},format=qcow2,if=virtio" in " ".join(argv)
    kernel_file, initrd_file = boot.stage(scratch)
    assert kernel_file.read_text() == f"kernel {NEW}" and initrd_file.read_text() == f"initrd {NEW}"
    assert kernel_file.stat().st_mode & 0o777 == 0o600


def test_a_disk_booted_by_its_bootloader_has_no_kernel_options(tmp_path: Path) -> None:
    argv = qemu_argv(MachineSpec(image=tmp_path / "disk.qcow2"), "tcg", tmp_path, 2200, "k")
    assert not {"-kernel", "-initrd", "-append"} & set(argv)


@pytest.mark.parametrize(
    "link", [f"../../../../boot/vmlinuz-{OLD}", f"/boot/vmlinuz-{OLD}", f"boot/vmlinuz-{OLD}"]
)
def test_the_vmlinuz_link_is_followed_inside_the_image(tmp_path: Path, link: str) -> None:
    """Debian's /vmlinuz link names the kernel to boot, even when an older one: '..' past the root and
    an absolute target stay in the image (the host has no /boot/vmlinuz-6.1.0-9-cloud-amd64)."""
    target = opened(bare_ext4(tmp_path, {**kernels(OLD, NEW), "/vmlinuz": {"link": link}}))
    boot = plan(target, UUID, "bare.ext4")
    assert boot.kernel == f"/boot/vmlinuz-{OLD}" and boot.initrd == f"/boot/initrd.img-{OLD}"
    assert boot.why.endswith(f"/vmlinuz points to vmlinuz-{OLD}")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert boot.stage(scratch)[0].read_text() == f"kernel {OLD}"


@pytest.mark.parametrize("link", ["../../etc/shadow", "/etc/shadow", "../../../../../../etc/shadow"])
def test_a_vmlinuz_link_leading_out_of_boot_is_ignored(tmp_path: Path, link: str) -> None:
    """/boot/vmlinuz -> /etc/shadow is the image's own shadow file once resolved (never the host's), and
    not a kernel: the link is ignored and the newest kernel in /boot is booted."""
    target = opened(bare_ext4(tmp_path, {**kernels(NEW), "/boot/vmlinuz": {"link": link}}))
    assert target.resolve("/boot/vmlinuz") == "/etc/shadow"
    boot = plan(target, UUID, "bare.ext4")
    assert boot.kernel == f"/boot/vmlinuz-{NEW}"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert boot.stage(scratch)[0].read_text() == f"kernel {NEW}"


def test_a_versioned_kernel_that_is_a_link_out_of_boot_is_no_kernel(tmp_path: Path) -> None:
    image = bare_ext4(
        tmp_path, {f"/boot/vmlinuz-{NEW}": {"link": "/etc/shadow"}, f"/boot/initrd.img-{NEW}": ""}
    )
    with pytest.raises(VmError, match=NO_KERNEL):
        plan(opened(image), UUID, "bare.ext4")


def test_no_kernel_in_boot_is_refused(tmp_path: Path) -> None:
    with pytest.raises(VmError) as refused:
        plan(opened(bare_ext4(tmp_path, {"/boot/config-6.1.0": ""})), UUID, "bare.ext4")
    assert (
        refused.value.message
        == NO_KERNEL
        == "a bare filesystem image with no kernel in /boot cannot be booted"
    )


def test_a_kernel_without_an_initrd_is_refused(tmp_path: Path) -> None:
    with pytest.raises(VmError, match=f"no initrd in /boot for vmlinuz-{NEW}"):
        plan(opened(bare_ext4(tmp_path, kernels(NEW, initrd=False))), UUID, "bare.ext4")


def test_fedora_initramfs_names_are_found(tmp_path: Path) -> None:
    image = bare_ext4(
        tmp_path,
        {"/boot/vmlinuz-6.5.6-300.fc39.x86_64": "k", "/boot/initramfs-6.5.6-300.fc39.x86_64.img": "i"},
    )
    assert plan(opened(image), UUID, "bare.ext4").initrd == "/boot/initramfs-6.5.6-300.fc39.x86_64.img"


@pytest.mark.parametrize(
    ("limit", "path"), [("KERNEL_LIMIT", f"/boot/vmlinuz-{NEW}"), ("INITRD_LIMIT", f"/boot/initrd.img-{NEW}")]
)
def test_a_kernel_or_initrd_over_its_limit_is_refused_before_any_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: str, path: str
) -> None:
    target = opened(
        bare_ext4(tmp_path, {f"/boot/vmlinuz-{NEW}": "k" * 4096, f"/boot/initrd.img-{NEW}": "i" * 4096})
    )
    monkeypatch.setattr(kernel, limit, 1024)
    with pytest.raises(VmError) as refused:
        plan(target, UUID, "bare.ext4")
    assert refused.value.message == f"{path} is 4.0 KiB, over the 1.0 KiB a direct kernel boot reads"


def test_the_copy_is_bounded_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that is larger than planned (limits lowered after the plan) stops the copy at the limit."""
    target = opened(
        bare_ext4(tmp_path, {f"/boot/vmlinuz-{NEW}": "k" * (3 << 20), f"/boot/initrd.img-{NEW}": "i"})
    )
    boot = plan(target, UUID, "bare.ext4")
    monkeypatch.setattr(kernel, "KERNEL_LIMIT", 1 << 20)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(VmError, match=r"over the 1\.0 MiB"):
        boot.stage(scratch)
    assert (scratch / "kernel").stat().st_size <= 1 << 20
