"""The throwaway key, the NoCloud seed (read back with isoinfo), the SMBIOS credential, the client."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

from imagelint.vm.access import client_command, make_key, make_seed, smbios_credential
from tests.support import need
from tests.vm.conftest import need_qemu


def test_the_seed_is_a_cidata_volume_giving_root_the_fresh_key(tmp_path: Path) -> None:
    need_qemu()
    need(shutil.which("isoinfo") is not None, "isoinfo is not installed (Debian: genisoimage)")
    key, public = make_key(tmp_path)
    assert public.startswith("ssh-ed25519 ") and key.stat().st_mode & 0o077 == 0
    iso = make_seed(tmp_path, public, "imagelint-1")
    label = subprocess.run(
        ["isoinfo", "-d", "-i", str(iso)], capture_output=True, text=True, check=True
    ).stdout
    assert "Volume id: cidata" in label
    user_data = subprocess.run(
        ["isoinfo", "-R", "-i", str(iso), "-x", "/user-data"], capture_output=True, text=True, check=True
    ).stdout
    assert user_data.startswith("#cloud-config\n") and f"      - {public}\n" in user_data
    assert "disable_root: false" in user_data


def test_the_credential_is_roots_authorized_key_for_systemd() -> None:
    value = smbios_credential("ssh-ed25519 AAAA imagelint-vm")
    prefix = "type=11,value=io.systemd.credential.binary:ssh.authorized_keys.root="
    assert value.startswith(prefix)
    assert base64.b64decode(value[len(prefix) :]) == b"ssh-ed25519 AAAA imagelint-vm\n"


def test_the_client_reads_no_user_configuration_and_learns_only_this_guests_key(tmp_path: Path) -> None:
    argv = client_command(tmp_path / "id", tmp_path / "known_hosts", 2222)
    pairs = {argv[i + 1] for i, a in enumerate(argv) if a == "-o"}
    assert argv[:3] == ["ssh", "-F", "/dev/null"]
    assert {"BatchMode=yes", "StrictHostKeyChecking=accept-new", "GlobalKnownHostsFile=/dev/null"} <= pairs
    assert f"UserKnownHostsFile={tmp_path / 'known_hosts'}" in pairs
    assert argv[-2:] == ["-p", "2222"]
