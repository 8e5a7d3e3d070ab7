"""How the machine lets imagelint in with nothing baked into the image: a throwaway key, offered twice.

- a NoCloud seed (an ISO 9660 volume labelled ``cidata``, made by ``genisoimage``) whose user-data
  gives root the key, for images with cloud-init;
- a systemd credential in SMBIOS type 11 (``io.systemd.credential.binary:ssh.authorized_keys.root``),
  which systemd 252 and later install as root's authorized keys at boot, for images without it.

The client is the system's ``ssh`` with no user configuration (``-F /dev/null``): the key, a
``known_hosts`` file in the scratch directory that learns the guest's new host key on first contact
(``StrictHostKeyChecking=accept-new``, then held to it), loopback and the forwarded port only.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

from imagelint.vm import VmError

TOOL_TIMEOUT = 60.0
CONNECT_TIMEOUT = 15  # seconds for one ssh connection attempt


def make_key(directory: Path) -> tuple[Path, str]:
    """A fresh ed25519 key pair in ``directory``: the private key's path and the public key's line."""
    key = directory / "id_ed25519"
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "imagelint-vm", "-f", str(key)], "ssh-keygen")
    return key, key.with_suffix(".pub").read_text().strip()


def make_seed(directory: Path, public_key: str, name: str) -> Path:
    """The NoCloud seed ISO for ``public_key``, in ``directory``."""
    source = directory / "seed"
    source.mkdir(mode=0o700)
    (source / "user-data").write_text(
        "#cloud-config\n"
        "disable_root: false\n"
        "ssh_pwauth: false\n"
        "users:\n"
        "  - name: root\n"
        "    ssh_authorized_keys:\n"
        f"      - {public_key}\n"
    )
    (source / "meta-data").write_text(f"instance-id: {name}\nlocal-hostname: {name}\n")
    iso = directory / "seed.iso"
    argv = ["genisoimage", "-quiet", "-V", "cidata", "-r", "-J", "-o", str(iso)]
    _run([*argv, str(source / "user-data"), str(source / "meta-data")], "genisoimage")
    return iso


def smbios_credential(public_key: str) -> str:
    """The ``-smbios`` argument that hands ``public_key`` to systemd as root's authorized key."""
    encoded = base64.b64encode(f"{public_key}\n".encode()).decode("ascii")
    return f"type=11,value=io.systemd.credential.binary:ssh.authorized_keys.root={encoded}"


def client_command(key: Path, known_hosts: Path, port: int) -> list[str]:
    """The ssh client's command line before ``--`` and the destination (``root@127.0.0.1``)."""
    return [
        "ssh",
        "-F",
        "/dev/null",
        "-T",
        "-o",
        "BatchMode=yes",
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "IdentityAgent=none",
        "-i",
        str(key),
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        f"ConnectTimeout={CONNECT_TIMEOUT}",
        "-o",
        "ServerAliveInterval=15",
        "-o",
        "ServerAliveCountMax=8",
        "-p",
        str(port),
    ]


def _run(argv: list[str], tool: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=TOOL_TIMEOUT, check=False)
    except FileNotFoundError:
        raise VmError(f"{tool} is not installed") from None
    except subprocess.TimeoutExpired:
        raise VmError(f"{tool} did not finish within {TOOL_TIMEOUT:.0f} s") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise VmError(f"{tool} failed: {said[-1] if said else f'exit {done.returncode}'}")
