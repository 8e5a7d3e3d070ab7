"""The ways in an image takes, read offline: crafted trees and a real debootstrapped Debian 12."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from imagelint.targets.rootfs import RootfsTarget
from imagelint.vm.reachable import MIN_SYSTEMD, SHARED_LIBRARY, decide, systemd_version
from imagelint.vm.reachable import PROVISION as PROVISION_PATHS
from imagelint.vm.reachable import SSHD as SSHD_PATHS
from tests.support import REPO, os_root

# Debian 12's /usr/lib/tmpfiles.d/provision.conf, the lines that matter
PROVISION = (
    "# Provision SSH key for root\n"
    "d- /root :0700 root :root -\n"
    "d- /root/.ssh :0700 root :root -\n"
    "f^ /root/.ssh/authorized_keys :0600 root :root - ssh.authorized_keys.root\n"
)
SSHD = {"/usr/sbin/sshd": ""}
CLOUD_INIT = {"/usr/bin/cloud-init": "", "/etc/cloud/cloud.cfg": "datasource_list: [NoCloud]\n"}


def systemd(version: str, lib: str = "/usr/lib/x86_64-linux-gnu/systemd") -> dict[str, object]:
    return {f"{lib}/libsystemd-shared-{version}.so": "", "/usr/lib/tmpfiles.d/provision.conf": PROVISION}


def target(tmp_path: Path, entries: dict[str, object]) -> RootfsTarget:
    return RootfsTarget(os_root(tmp_path / "root", entries))


def test_a_debian_12_tree_without_cloud_init_takes_the_credential_only(debian_rootfs: Path) -> None:
    """The real debootstrapped bookworm tree (systemd 252, provision.conf, openssh-server)."""
    access = decide(RootfsTarget(debian_rootfs))
    assert access.systemd == 252 and access.sshd
    assert (access.seed, access.credential) == (False, True)
    assert access.offered == ["smbios-credential"] and access.refusal is None
    assert access.credential_why == (
        "systemd 252 installs ssh.authorized_keys.root (/usr/lib/tmpfiles.d/provision.conf)"
    )


def test_cloud_init_and_an_old_systemd_takes_the_seed_only(tmp_path: Path) -> None:
    access = decide(target(tmp_path, {**SSHD, **CLOUD_INIT, **systemd("247", "/lib/systemd")}))
    assert access.offered == ["nocloud-seed"] and access.refusal is None
    assert access.facts()["systemd_version"] == 247


def test_neither_way_is_one_line_naming_what_is_missing(tmp_path: Path) -> None:
    access = decide(target(tmp_path, {**SSHD, **systemd("247")}))
    assert access.offered == []
    assert access.refusal == (
        "no cloud-init (/usr/bin/cloud-init), and systemd 247 < 252 does not take "
        "ssh.authorized_keys.root: this image cannot be reached to soak it"
    )


@pytest.mark.parametrize(
    ("entries", "why"),
    [
        ({}, "no systemd version could be read (libsystemd-shared-NNN.so) to take ssh.authorized_keys.root"),
        (
            {"/usr/lib/systemd/libsystemd-shared-255.4-1.fc40.so": ""},
            "systemd 255 has no tmpfiles provision.conf installing ssh.authorized_keys.root",
        ),
        (
            {**systemd("254"), "/etc/tmpfiles.d/provision.conf": {"link": "/dev/null"}},
            "systemd 254 has no tmpfiles provision.conf installing ssh.authorized_keys.root",
        ),
        (
            {**systemd("254"), "/etc/tmpfiles.d/provision.conf": "f^ /etc/hosts - - - - network.hosts\n"},
            "systemd 254 has no tmpfiles provision.conf installing ssh.authorized_keys.root",
        ),
    ],
    ids=["no systemd library", "no provision.conf", "provision.conf masked", "provision.conf overridden"],
)
def test_the_credential_is_not_offered_without_a_systemd_that_installs_it(
    tmp_path: Path, entries: dict[str, object], why: str
) -> None:
    access = decide(target(tmp_path, {**SSHD, **entries}))
    assert not access.credential and access.credential_why == why
    assert (
        access.refusal
        == f"no cloud-init (/usr/bin/cloud-init), and {why}: this image cannot be reached to soak it"
    )


@pytest.mark.parametrize(
    ("entries", "why"),
    [
        ({"/usr/bin/cloud-init": ""}, "no cloud-init configuration (/etc/cloud)"),
        (
            {**CLOUD_INIT, "/etc/cloud/cloud-init.disabled": ""},
            "cloud-init disabled (/etc/cloud/cloud-init.disabled)",
        ),
    ],
)
def test_cloud_init_not_configured_or_disabled_is_not_given_the_seed(
    tmp_path: Path, entries: dict[str, object], why: str
) -> None:
    access = decide(target(tmp_path, {**SSHD, **entries, **systemd("252")}))
    assert (access.seed, access.seed_why, access.offered) == (False, why, ["smbios-credential"])


def test_no_sshd_is_refused_whatever_else_the_image_has(tmp_path: Path) -> None:
    access = decide(target(tmp_path, {**CLOUD_INIT, **systemd("252")}))
    assert access.refusal == (
        "no sshd (/usr/sbin/sshd or /usr/bin/sshd) in the image: this image cannot be reached to soak it"
    )


def test_the_newest_of_several_libraries_is_the_version_and_hostile_names_are_ignored(tmp_path: Path) -> None:
    tree = target(
        tmp_path,
        {
            "/usr/lib/systemd/libsystemd-shared-249.so": "",
            "/usr/lib64/systemd/libsystemd-shared-253.5-1.so": "",
            "/usr/lib/systemd/libsystemd-shared-999999999.so": "",  # no version of systemd: too long
            "/usr/lib/systemd/libsystemd-shared-x.so": "",
        },
    )
    assert systemd_version(tree) == 253


def test_the_docs_say_what_is_read_before_the_boot_and_the_refusal_as_it_is_printed(tmp_path: Path) -> None:
    """docs/vm.md's Access step names every file this module reads and quotes a real refusal line."""
    text = (REPO / "docs" / "vm.md").read_text()
    section = " ".join(text.split("**Access, decided before the boot.**")[1].split("3. **Boot.**")[0].split())
    named = [
        "/usr/bin/cloud-init",
        "/etc/cloud",
        "/etc/cloud/cloud-init.disabled",
        *SSHD_PATHS,
        *(str(PurePosixPath(pattern).parent) for pattern in SHARED_LIBRARY),
        *(f"{PurePosixPath(path).parent}/" for path in PROVISION_PATHS),
        f"systemd is {MIN_SYSTEMD} or later",
    ]
    assert [name for name in named if f"`{name}`" not in section and name not in section] == []
    refusal = decide(target(tmp_path, {**SSHD, **systemd("247")})).refusal
    assert f"`{refusal}`" in section
