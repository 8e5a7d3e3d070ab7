"""The Packer block `imagelint fix -f packer` prints, run by a real `packer build`: a null source whose
SSH communicator reaches the faulty image booted with systemd-nspawn (Debian's sshd, in a network
namespace of its own, reached on its loopback by running Packer inside it), so the block's shell
provisioner runs on the "build instance" as it would in a build. The image is then audited offline:
every rule the block fixes passes, and the build says so.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import _test_image
from tests.nspawn import booted
from tests.openers.test_ssh import _host_tree, _ready
from tests.support import run_cli

pytestmark = [pytest.mark.root, pytest.mark.slow]
FIXED = "IL201,IL203,IL206,IL501,IL102,IL106,IL110"  # the unit, the machine id, history, sshd


def test_the_packer_block_fixes_the_booted_image(tmp_path: Path) -> None:
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    root = _host_tree(_test_image("ssh", "bookworm-ssh"), tmp_path / "image", key, faulty=True)
    (root / "root/.bash_history").write_text("export SECRET=1\n")
    assert run_cli("audit", str(root), "--select", FIXED).returncode == 1
    block = run_cli("fix", str(root), "--select", FIXED, "-f", "packer")
    assert block.returncode == 0, block.stderr
    build = tmp_path / "build"
    build.mkdir()
    (build / "fix.pkr.hcl").write_text(
        'source "null" "booted" {\n'
        '  communicator         = "ssh"\n'
        '  ssh_host             = "127.0.0.1"\n'
        '  ssh_username         = "root"\n'
        f'  ssh_private_key_file = "{key}"\n'
        "}\n\n"
        'build {\n  sources = ["source.null.booted"]\n\n' + block.stdout + "}\n"
    )
    with booted(
        root, volatile=False, ready=_ready, timeout=120, name="fx", network=("--private-network",)
    ) as p:
        packer = subprocess.run(
            ["nsenter", "-n", "-t", p[2], "packer", "build", "-color=false", "."],
            cwd=build,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert packer.returncode == 0, packer.stdout[-4000:] + packer.stderr[-2000:]
    assert "null.booted: Provisioning with shell script" in packer.stdout, packer.stdout[-3000:]
    after = run_cli("audit", str(root), "--select", FIXED)
    assert after.returncode == 0, after.stdout[-3000:]
    assert not (root / "etc/systemd/system/multi-user.target.wants/ecs.service").is_symlink()
