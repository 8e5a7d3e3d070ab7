"""``ssh://HOST`` against a real OpenSSH server: Debian's sshd in the test image (plus sudo: the
``ssh`` flavour of ``scripts/build-test-rootfs.sh``), booted with systemd-nspawn in a network
namespace of its own (``--private-network``: only a loopback). The tests reach it on that loopback by
running the real ``ssh`` client inside the namespace: ``IMAGELINT_SSH_COMMAND`` is ``nsenter -n -t
PID ssh ...``, so no address of this machine is involved, and the variable is exercised too.

One container per image for the whole module (the faulty one: the sample image's faults planted,
so ``ecs.service`` is enabled and fails at boot; the clean one: the image cleaned, its host keys made
at first boot), reached as root and as ``tester``, a login with passwordless sudo.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import _test_image
from tests.nspawn import booted
from tests.support import clean_image, copy_rootfs, run_cli

pytestmark = [pytest.mark.root, pytest.mark.slow]

# Files a boot itself writes (machine-id, journal, random seed, host keys made at first boot): a
# booted host always has them, so the clean host is judged without these hygiene rules.
BOOT_ARTIFACTS = "IL101,IL102,IL112,IL115"
SCRATCH = "var/tmp"


@pytest.fixture(scope="module")
def ssh_image() -> Path:
    return _test_image("ssh", "bookworm-ssh")


@pytest.fixture(scope="module")
def client_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    key = tmp_path_factory.mktemp("client") / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key


def _authorize(root: Path, home: str, key: Path, owner: str) -> None:
    ssh = root / home.lstrip("/") / ".ssh"
    ssh.mkdir(mode=0o700, parents=True, exist_ok=True)
    (ssh / "authorized_keys").write_text(Path(f"{key}.pub").read_text())
    (ssh / "authorized_keys").chmod(0o600)
    subprocess.run(["chroot", str(root), "chown", "-R", f"{owner}:{owner}", f"{home}/.ssh"], check=True)


def _host_tree(src: Path, dest: Path, key: Path, *, faulty: bool) -> Path:
    from tests.aws.disk_image import plant_sample_faults

    root = copy_rootfs(src, dest)
    if faulty:
        plant_sample_faults(root)
        # the planted ed25519 host key is not a key: sshd serves the image's other ones
    else:
        clean_image(root)  # no host keys: made at first boot, as cloud images do
        dropin = root / "etc/systemd/system/ssh.service.d"
        dropin.mkdir(parents=True, exist_ok=True)
        (dropin / "host-keys.conf").write_text(
            "[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n"
        )
    subprocess.run(["chroot", str(root), "useradd", "-m", "-s", "/bin/sh", "tester"], check=True)
    (root / "etc/sudoers.d/tester").write_text("tester ALL=(ALL) NOPASSWD: ALL\n")
    (root / "etc/sudoers.d/tester").chmod(0o440)
    _authorize(root, "/root", key, "root")
    _authorize(root, "/home/tester", key, "tester")
    return root


class Host:
    """A booted image and how to reach it: the ssh command line and its known_hosts."""

    def __init__(self, root: Path, prefix: list[str], key: Path, work: Path) -> None:
        self.root, self.prefix, self.key = root, prefix, key
        self.known_hosts = work.with_name(f"{work.name}-known_hosts")
        keys = sorted((root / "etc/ssh").glob("ssh_host_*_key.pub"))
        lines = [f"127.0.0.1 {' '.join(k.read_text().split()[:2])}" for k in keys if "ed25519" not in k.name]
        self.known_hosts.write_text("\n".join(lines) + "\n")

    def command(self, known_hosts: Path | None = None) -> str:
        return (
            f"nsenter -n -t {self.prefix[2]} ssh -F none -T -o BatchMode=yes -o IdentitiesOnly=yes "
            f"-i {self.key} -o UserKnownHostsFile={known_hosts or self.known_hosts} "
            "-o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o ConnectTimeout=20 "
            "-o HostKeyAlgorithms=ecdsa-sha2-nistp256,rsa-sha2-512,rsa-sha2-256"
        )

    def cli(self, *args: str, known_hosts: Path | None = None, timeout: float = 300):
        return run_cli(*args, env={"IMAGELINT_SSH_COMMAND": self.command(known_hosts)}, timeout=timeout)

    def scratch_left(self) -> list[str]:
        return sorted(p.name for p in (self.root / SCRATCH).glob("imagelint.*"))


def _ready(prefix: list[str]) -> bool:
    proc = subprocess.run([*prefix, "systemctl", "is-active", "ssh.service"], capture_output=True, text=True)
    return proc.stdout.strip() == "active"


@pytest.fixture(scope="module")
def hosts(
    ssh_image: Path, client_key: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Host]]:
    work = tmp_path_factory.mktemp("ssh-hosts")
    faulty = _host_tree(ssh_image, work / "faulty", client_key, faulty=True)
    clean = _host_tree(ssh_image, work / "clean", client_key, faulty=False)
    with (
        booted(faulty, volatile=False, ready=_ready, timeout=120, name="f", private_network=True) as fp,
        booted(clean, volatile=False, ready=_ready, timeout=120, name="c", private_network=True) as cp,
    ):
        yield {
            "faulty": Host(faulty, fp, client_key, work / "f"),
            "clean": Host(clean, cp, client_key, work / "c"),
        }


def _findings(path: Path) -> set[tuple[str, str]]:
    return {(f["rule_id"], f["subject"]) for f in json.loads(path.read_text())["findings"]}


def test_faulty_host_fails_naming_ecs_from_the_image_and_the_manager(hosts: dict[str, Host], tmp_path: Path) -> None:
    host = hosts["faulty"]
    out = tmp_path / "report.json"
    proc = host.cli("audit", "ssh://root@127.0.0.1", "-f", f"json:{out}")
    assert proc.returncode == 1, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    ecs = [f for f in report["findings"] if "ecs.service" in f["subject"]]
    print(json.dumps(ecs, indent=1)[:5000])
    assert 0
    assert report["target"]["path"] == "ssh://root@127.0.0.1"
    assert host.scratch_left() == []
