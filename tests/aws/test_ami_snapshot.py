"""`imagelint ami AMI --mode snapshot` and `imagelint audit|units ebs:snap-…` end to end, against moto.

The faulty Debian tree is made into a GPT disk (EFI + ext4), written to a snapshot with
StartSnapshot / PutSnapshotBlock (SHA256 checksums, zero blocks skipped) / CompleteSnapshot, and an
AMI is registered on it. The CLI (a subprocess, as a user runs it) must then report the findings and
units of the directory audit of the same tree, count the blocks it fetched (equal to what the server
served, a small part of the snapshot), and turn denial, absence and throttling into the documented
outcomes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from imagelint.aws.clients import Clients
from imagelint.aws.ebs_api import EbsApi
from imagelint.aws.ebs_blocks import SnapshotStream
from imagelint.engine import RunSettings, audit
from imagelint.report.escape import json_text
from imagelint.report.schema import report_schema
from imagelint.session import load_rules
from imagelint.targets.disk import open_disk_target
from tests.aws.conftest import findings as _findings
from tests.aws.ebs_upload import register_image, upload_image
from tests.aws.moto_env import REGION, MotoEnv
from tests.aws.snapshot_streams import NoPrefetch
from tests.support import need, run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def aws(faulty_disk: Path) -> Iterator[tuple[MotoEnv, str, str]]:
    with MotoEnv() as env:
        snapshot_id, _ = upload_image(env.client("ebs", direct=True), faulty_disk)
        image_id = register_image(env.client("ec2"), snapshot_id)
        yield env, snapshot_id, image_id


@pytest.fixture
def env(aws: tuple[MotoEnv, str, str]) -> Iterator[MotoEnv]:
    aws[0].ebs.reset()
    yield aws[0]
    aws[0].ebs.reset()


@pytest.fixture(scope="module")
def expected(faulty_tree_report: dict[str, Any]) -> dict[str, Any]:
    return faulty_tree_report


def test_ami_snapshot_mode_equals_the_directory_audit(
    env: MotoEnv, aws: tuple[MotoEnv, str, str], expected: dict[str, Any], tmp_path: Path
) -> None:
    _, snapshot_id, image_id = aws
    out = tmp_path / "ami.json"
    proc = run_cli("ami", image_id, "--mode", "snapshot", "-f", f"json:{out}", env=env.env, timeout=300)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(out.read_text())
    jsonschema.validate(report, report_schema())
    assert _findings(report) == _findings(expected)
    assert {"IL101", "IL201"} <= {f["rule_id"] for f in report["findings"]}  # the ECS agent, machine-id
    assert report["target"]["kind"] == "ami" and report["target"]["mode"] == "snapshot"
    io = report["facts"]["disk"]["io"]
    assert io["blocks_fetched"] == len(env.ebs.gets) > 0  # counted = what the server served
    assert io["bytes_fetched"] == io["blocks_fetched"] * 524288
    assert io["blocks_fetched"] < io["blocks_listed"] / 2  # read in place, not downloaded
    assert report["facts"]["snapshot"]["snapshot_id"] == snapshot_id
    assert report["facts"]["disk"]["partition_table"] == "gpt"
    assert "blocks allocated" in proc.stderr and f"read {io['blocks_fetched']} of" in proc.stderr


def test_audit_ebs_snapshot_equals_the_directory_audit(
    env: MotoEnv, aws: tuple[MotoEnv, str, str], expected: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "snap.json"
    proc = run_cli("audit", f"ebs:{aws[1]}", "-f", f"json:{out}", env=env.env, timeout=300)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(out.read_text())
    jsonschema.validate(report, report_schema())
    assert _findings(report) == _findings(expected)
    assert report["target"] == {
        "kind": "ebs-snapshot",
        "path": f"ebs:{aws[1]}",
        "snapshot_id": aws[1],
        "region": "us-east-1",
    }


def test_units_of_the_snapshot_equal_the_directory_units(
    env: MotoEnv, aws: tuple[MotoEnv, str, str], faulty_tree: Path
) -> None:
    tree = run_cli("units", str(faulty_tree), "--format", "json", timeout=300)
    snap = run_cli("units", f"ebs:{aws[1]}", "--format", "json", env=env.env, timeout=300)
    assert tree.returncode == snap.returncode == 0, snap.stderr
    want, got = json.loads(tree.stdout), json.loads(snap.stdout)
    assert got["root"] == f"ebs:{aws[1]}"
    assert got["units"] == want["units"]
    assert any(u["name"] == "ecs.service" and u["state"] == "enabled" for u in got["units"])


@pytest.mark.lane  # waits out the SDK's back-offs
def test_throttled_reads_are_retried_and_counted(
    env: MotoEnv, aws: tuple[MotoEnv, str, str], expected: dict[str, Any], tmp_path: Path
) -> None:
    env.ebs.throttle, env.ebs.unavailable = 4, 2
    out = tmp_path / "throttled.json"
    proc = run_cli("audit", f"ebs:{aws[1]}", "-f", f"json:{out}", env=env.env, timeout=300)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(out.read_text())
    assert _findings(report) == _findings(expected)
    io = report["facts"]["disk"]["io"]
    assert io["throttled"] == 4 and io["retries"] == 6


def test_prefetch_changes_nothing_but_the_counters(
    env: MotoEnv,
    aws: tuple[MotoEnv, str, str],
    expected: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The audit of the snapshot through the real stream, with the disk target's read hints and
    without: the same report byte for byte but for timings and the I/O counters, and the findings of
    the directory audit."""
    for key, value in env.env.items():
        monkeypatch.setenv(key, value)
    packs, config = load_rules(None, [], builtin=True)

    def report(hinted: bool) -> tuple[str, dict[str, int]]:
        api = EbsApi(Clients(REGION).ebs(16), aws[1])
        with SnapshotStream(api) as stream:
            disk = stream if hinted else NoPrefetch(stream)
            data = audit(open_disk_target(disk, description="snap"), packs, config, RunSettings()).to_dict()
            stream.raise_if_failed()
        io_stats = data["facts"]["disk"].pop("io")
        data.pop("started_at"), data.pop("duration_s")
        for rule in data["rules"]:
            rule.pop("duration_ms")
        return json_text(data, indent=2), io_stats

    plain, plain_io = report(hinted=False)
    hinted, hinted_io = report(hinted=True)
    assert hinted == plain
    assert _findings(json.loads(hinted)) == _findings(expected)
    assert plain_io["prefetch_blocks"] == 0
    assert hinted_io["prefetch_blocks"] > 0 and hinted_io["prefetch_unread"] == 0


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        ({"deny": "list"}, "ebs ListSnapshotBlocks failed: AccessDeniedException"),
        ({"deny": "get"}, "ebs GetSnapshotBlock failed: AccessDeniedException"),
        ({"not_found": True}, "ebs ListSnapshotBlocks failed: ResourceNotFoundException"),
        ({"corrupt": 1000}, "ebs GetSnapshotBlock failed: ChecksumMismatch"),
    ],
)
def test_unreadable_snapshots_are_one_line_and_inconclusive(
    env: MotoEnv, aws: tuple[MotoEnv, str, str], fault: dict[str, Any], says: str, tmp_path: Path
) -> None:
    for key, value in fault.items():
        setattr(env.ebs, key, value)
    out = tmp_path / "report.json"
    proc = run_cli("ami", aws[2], "--mode", "snapshot", "-f", f"json:{out}", env=env.env, timeout=300)
    assert proc.returncode == 3, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("imagelint: error:")]
    assert len(lines) == 1 and says in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()  # no report that could pass for one


def test_snapshot_mode_needs_no_bucket_and_creates_nothing(
    env: MotoEnv, aws: tuple[MotoEnv, str, str]
) -> None:
    proc = run_cli("ami", aws[2], "--mode", "snapshot", "-f", "text", env=env.env, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert env.alive() == {"instances": [], "volumes": [], "groups": []}
    assert env.launched() == []


def _config_opens(args: list[str], config: Path, log: Path, env: dict[str, str]) -> int:
    """How often a run opens the config file (strace follows imagelint's box and every thread)."""
    import sys

    exe = shutil.which("imagelint", path=str(Path(sys.executable).parent)) or "imagelint"
    strace = ["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", str(log)]
    subprocess.run(
        [*strace, exe, *args, "-c", str(config)], env=env, capture_output=True, timeout=300, check=False
    )
    return sum(1 for line in log.read_text().splitlines() if f'"{config}"' in line and "ENOENT" not in line)


def test_ami_loads_its_config_and_rules_once_whatever_the_number_of_images(
    env: MotoEnv, aws: tuple[MotoEnv, str, str], tmp_path: Path
) -> None:
    """It loaded them once to check the options, then again for each image (and after each soak)."""
    need(shutil.which("strace") is not None, "strace is not installed")
    config = tmp_path / "ami.imagelint.yaml"
    config.write_text("fail-on: high\n")
    second = register_image(env.client("ec2"), aws[1], name="imagelint-snapshot-test-2")
    full_env = {**os.environ, **env.env, "NO_COLOR": "1"}
    once = _config_opens(["rules", "list"], config, tmp_path / "rules.log", full_env)
    assert once >= 1
    two_images = ["ami", aws[2], second, "--mode", "snapshot", "-f", "json:/dev/null"]
    assert _config_opens(two_images, config, tmp_path / "ami.log", full_env) == once


def test_a_snapshot_whose_root_filesystem_is_not_an_os_root_is_inconclusive(tmp_path: Path) -> None:
    """An image pipeline that snapshotted a volume before the OS was laid on it (an ext4 with an
    os-release and nothing else): `ami --mode snapshot` and `audit ebs:snap-…` say which marks of an
    OS root are missing and exit 3, where they passed it as clean."""
    need(shutil.which("mke2fs") is not None, "mke2fs is not installed (e2fsprogs)")
    tree = tmp_path / "tree"
    (tree / "etc").mkdir(parents=True)
    (tree / "etc/os-release").write_text("ID=debian\n")
    disk = tmp_path / "disk.img"
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-d", str(tree), str(disk), "8M"], check=True)
    with MotoEnv() as moto:
        snapshot_id, _ = upload_image(moto.client("ebs", direct=True), disk)
        image_id = register_image(moto.client("ec2"), snapshot_id)
        for args in (["ami", image_id, "--mode", "snapshot"], ["audit", f"ebs:{snapshot_id}"]):
            proc = run_cli(*args, env=moto.env, timeout=300)
            assert proc.returncode == 3, (args, proc.returncode, proc.stderr)
            refused = [line for line in proc.stderr.splitlines() if "not an operating system's root" in line]
            assert len(refused) == 1 and "no usr tree" in refused[0] and "no init" in refused[0], proc.stderr
            assert "no os-release" not in refused[0] and snapshot_id in refused[0], refused
