"""Kernel command line sources and os-release, as each distribution keeps them."""

from __future__ import annotations

from pathlib import Path

from imagelint.facts.bootconfig import image_facts
from imagelint.targets import RootfsTarget
from tests.support import build_tree


def test_every_kernel_command_line_source_is_listed_with_where_it_is(tmp_path: Path) -> None:
    root = build_tree(
        tmp_path / "img",
        {
            "/etc/default/grub": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="console=ttyS0"\n'
            "GRUB_CMDLINE_LINUX='console=ttyS0,115200n8 net.ifnames=0'  # a comment\n",
            "/etc/kernel/cmdline": "root=UUID=abc ro\n  quiet\n",
            "/boot/loader/entries/abc-5.14.0.conf": (
                "title RHEL\noptions root=/dev/xvda1 ro crashkernel=auto\n"
            ),
            "/etc/os-release": 'NAME="Amazon Linux"\nVERSION_ID="2023"\nID=amzn\n# comment\n',
        },
    )
    facts = image_facts(RootfsTarget(root))
    assert facts["kernel_cmdline"] == [
        {"source": "/etc/kernel/cmdline", "value": "root=UUID=abc ro quiet"},
        {"source": "/boot/loader/entries/abc-5.14.0.conf", "value": "root=/dev/xvda1 ro crashkernel=auto"},
        {"source": "/etc/default/grub:GRUB_CMDLINE_LINUX_DEFAULT", "value": "quiet"},
        {"source": "/etc/default/grub:GRUB_CMDLINE_LINUX", "value": "console=ttyS0,115200n8 net.ifnames=0"},
    ]
    assert facts["os_release"] == {"NAME": "Amazon Linux", "VERSION_ID": "2023", "ID": "amzn"}
    assert facts["problems"] == []


def test_the_real_debian_tree(debian_rootfs: Path) -> None:
    facts = image_facts(RootfsTarget(debian_rootfs))
    assert facts["os_release"]["ID"] == "debian" and facts["os_release"]["VERSION_ID"] == "12"
    assert facts["kernel_cmdline"] == []  # debootstrap installs no kernel nor boot loader


def test_a_live_host_lists_proc_cmdline() -> None:
    facts = image_facts(RootfsTarget("/"), live=True)
    assert facts["kernel_cmdline"][0] == {
        "source": "/proc/cmdline",
        "value": Path("/proc/cmdline").read_text().strip(),
    }
