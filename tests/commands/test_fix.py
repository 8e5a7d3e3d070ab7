"""``imagelint fix`` end to end on a copy of the real Debian image with the incident's faults added: the
printed script run for real with ``sh`` and ``--apply`` leave identical trees, the audit then passes,
and running either again changes nothing. Hostile names and packs cannot add shell."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.remedy.trees import differences, listing
from tests.support import copy_rootfs, os_root, run_cli

ECS = (
    "[Service]\nExecStart=/usr/libexec/amazon-ecs-init start\nRestart=on-failure\n\n"
    "[Install]\nWantedBy=multi-user.target\n"
)
HOSTILE = ".x'$(touch pwned)\n`touch pwned`_history"  # run in the test's directory: no pwned file


@pytest.fixture
def faulty(debian_rootfs: Path, tmp_path: Path) -> Path:
    root = copy_rootfs(debian_rootfs, tmp_path / "image")
    (root / "usr/lib/systemd/system/ecs.service").write_text(ECS)
    os.symlink(
        "/lib/systemd/system/ecs.service", root / "etc/systemd/system/multi-user.target.wants/ecs.service"
    )
    (root / "etc/ecs").mkdir()
    (root / "etc/ecs/ecs.config").write_text("ECS_LOGLEVEL=info\n")
    with (root / "etc/ssh/sshd_config").open("a") as f:
        f.write("PermitRootLogin yes\n")
    (root / "root" / HOSTILE).write_text("export SECRET=1\n")
    (root / "root/.ssh").mkdir(exist_ok=True)
    (root / "root/.ssh/id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    archives = root / "var/cache/apt/archives"
    (archives / "partial").mkdir(parents=True, exist_ok=True)
    (archives / "lock").touch()
    (archives / "curl_7.88.1-10_amd64.deb").write_bytes(b"!<arch>\n")
    (root / "var/cache/apt/pkgcache.bin").write_bytes(b"\0" * 64)
    shadow = root / "etc/shadow"
    shadow.write_text(shadow.read_text().replace("root:*:", "root:$6$salt$hash:", 1))
    assert "root:$6$" in shadow.read_text()
    cron = root / "etc/cron.d/backup"
    cron.write_text("* * * * * root /bin/true\n")
    cron.chmod(0o666)
    return root


def _script(root: Path, *args: str) -> str:
    proc = run_cli("fix", str(root), *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_script_and_apply_agree_and_the_audit_passes(faulty: Path, tmp_path: Path) -> None:
    script = tmp_path / "fix.sh"
    script.write_text(_script(faulty, "--fail-on", "low"))  # IL113's package caches are low
    by_script = copy_rootfs(faulty, tmp_path / "by-script")
    by_apply = copy_rootfs(faulty, tmp_path / "by-apply")
    subprocess.run(["sh", str(script), str(by_script)], check=True, capture_output=True, cwd=tmp_path)
    applied = run_cli("fix", str(by_apply), "--apply", "--fail-on", "low", cwd=tmp_path)

    assert not (tmp_path / "pwned").exists()
    assert "not fixable automatically: IL105 /root/.ssh/id_ed25519: rotate the key" in applied.stderr
    assert applied.returncode == 0, applied.stderr  # the audit after --apply passes
    assert differences(listing(by_script), listing(by_apply)) == []
    assert not (by_script / "etc/systemd/system/multi-user.target.wants/ecs.service").is_symlink()
    assert (by_script / "etc/machine-id").read_bytes() == b""
    assert os.readlink(by_script / "var/lib/dbus/machine-id") == "/etc/machine-id"
    assert not (by_script / "root" / HOSTILE).exists()
    assert sorted(p.name for p in (by_script / "var/cache/apt/archives").iterdir()) == ["lock", "partial"]
    assert not (by_script / "var/cache/apt/pkgcache.bin").exists()
    assert "root:!$6$salt$hash:" in (by_script / "etc/shadow").read_text()
    assert (by_script / "etc/cron.d/backup").stat().st_mode & 0o7777 == 0o664
    audit = run_cli("audit", str(by_script))
    assert audit.returncode == 0, audit.stdout

    before = listing(by_script)  # again: nothing changes, either way
    subprocess.run(["sh", str(script), str(by_script)], check=True, capture_output=True)
    assert differences(before, listing(by_script)) == []
    again = run_cli("fix", str(by_apply), "--apply")
    assert again.returncode == 0 and "removed" not in again.stderr
    assert differences(before, listing(by_apply)) == []


def test_dry_run_names_the_finding_each_action_clears(faulty: Path) -> None:
    out = _script(faulty, "--dry-run", "--select", "IL501,IL102")
    assert "disable-unit unit=ecs.service\n    clears IL501 ecs.service" in out
    assert "empty-file path=/etc/machine-id\n    clears IL102 /etc/machine-id" in out
    assert "IL101" not in out


def test_packer_block_runs_the_same_script(faulty: Path) -> None:
    block = _script(faulty, "-f", "packer", "--select", "IL102")
    assert block.count('provisioner "shell" {') == 1
    assert "$${1:-/}" in block and "${1:-/}" not in block.replace("$${", "")
    assert ': > "$il_root"/etc/machine-id' in block


def test_apply_refuses_a_disk_image(faulty: Path, tmp_path: Path) -> None:
    small = os_root(tmp_path / "small", {"/etc/machine-id": "0123456789abcdef0123456789abcdef\n"})
    disk = tmp_path / "disk.img"
    subprocess.run(["mke2fs", "-q", "-t", "ext4", "-d", str(small), str(disk), "8M"], check=True)
    proc = run_cli("fix", str(disk), "--apply")
    assert proc.returncode == 2, proc.stderr
    assert "--apply changes a directory tree only" in proc.stderr
    assert "fix" in run_cli("fix", str(disk)).stdout  # the script is still printed


def test_apply_refuses_a_bundle(tmp_path: Path) -> None:
    from tests.bundle.support import collect_soak_bundle

    bundle = collect_soak_bundle(tmp_path)
    proc = run_cli("fix", str(bundle), "--apply")
    assert proc.returncode == 2 and "--apply changes a directory tree only" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1


def test_a_pack_cannot_add_shell(tmp_path: Path) -> None:
    root = os_root(tmp_path / "root", {"/etc/x.conf": "bad\n"})
    pack = tmp_path / "pack.yaml"
    pack.write_text(
        "rules:\n  - id: ZZ001\n    name: x\n    title: x\n    severity: high\n    scope: [image]\n"
        "    check: {kind: file.present, paths: [/etc/x.conf]}\n    message: m\n    remediation: r\n"
        "    fix:\n      - {action: remove-path, path: \"/etc/x.conf'; touch pwned; '\"}\n"
    )
    fixed = run_cli("fix", str(root), "--no-builtin-rules", "-r", str(pack))
    assert fixed.returncode == 0 and "/etc/x.conf" in fixed.stdout, fixed.stderr  # a script was written
    script = fixed.stdout
    subprocess.run(["sh", "-c", script, "fix", str(root)], check=True, capture_output=True, cwd=tmp_path)
    assert not (tmp_path / "pwned").exists()
    pack.write_text(pack.read_text().replace("action: remove-path", "action: run-command"))
    refused = run_cli("fix", str(root), "--no-builtin-rules", "-r", str(pack))
    assert refused.returncode == 2 and f"{pack}:" in refused.stderr


def test_the_same_plan_applied_twice_changes_nothing_the_second_time(faulty: Path) -> None:
    from imagelint.openers import open_spec
    from imagelint.remedy.apply import apply_plan
    from imagelint.remedy.plan import make_plan
    from imagelint.remedy.rootdir import RootDir
    from imagelint.session import RunOptions, audit_opened, prepare

    run = prepare(RunOptions())
    with open_spec(str(faulty)) as opened:
        assert opened.target is not None
        plan = make_plan(audit_opened(run, opened), [r for p in run.packs for r in p.rules], opened.target)
    assert apply_plan(plan, RootDir(faulty))
    before = listing(faulty)
    assert apply_plan(plan, RootDir(faulty)) == []
    assert differences(before, listing(faulty)) == []


def test_a_finding_folded_into_a_failing_one_is_fixed_with_it(faulty: Path) -> None:
    """IL206 (an endless loop at boot) declares no fix; IL501 folded into it does: the plan disables
    the unit and says that clears IL206 too, instead of leaving the loop to a person."""
    unit = faulty / "usr/lib/systemd/system/ecs.service"
    unit.write_text(unit.read_text().replace("Restart=on-failure\n", "Restart=on-failure\nRestartSec=10s\n"))
    assert "part of IL206" in run_cli("audit", str(faulty), "--select", "IL206,IL501").stdout
    out = _script(faulty, "--dry-run", "--select", "IL206,IL501")
    assert "disable-unit unit=ecs.service\n    clears IL501 ecs.service" in out
    assert "clears IL206 ecs.service (its unit is disabled)" in out
    assert "not fixable" not in out
