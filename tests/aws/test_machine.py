"""`imagelint ami AMI --mode snapshot` on an AMI of two EBS snapshots, against moto.

The faulty Debian tree is split as a CIS-style image is: a GPT root disk whose ``/var`` is an empty
directory and whose fstab mounts ``/var`` by UUID from a second, unpartitioned ext4 volume holding
the tree's ``/var`` (``tests.aws.disk_image.split_var_images``). The AMI maps the root on
``/dev/xvda``, ``/var`` on ``/dev/sdb`` and an instance-store disk on ``/dev/sdc``. Snapshot mode
must read both snapshots and report what the directory audit of the whole tree reports (the
cloud-init state planted under ``/var`` included), while the root snapshot alone misses it; and
when the ``/var`` snapshot cannot be read, the run is inconclusive with one line naming ``/var``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from imagelint.aws.machine import kernel_names, mappings_of
from imagelint.report.schema import report_schema
from tests.aws.conftest import findings
from tests.aws.disk_image import VAR_UUID, split_var_images
from tests.aws.ebs_upload import register_image, upload_image
from tests.aws.moto_env import MotoEnv
from tests.support import run_cli

pytestmark = pytest.mark.slow

VAR_ONLY = "IL108"  # cloud-init state under /var/lib/cloud: a fault only the /var volume holds


@pytest.fixture(scope="module")
def split_disks(faulty_tree: Path) -> tuple[Path, Path]:
    return split_var_images(faulty_tree)


@pytest.fixture(scope="module")
def aws(split_disks: tuple[Path, Path]) -> Iterator[tuple[MotoEnv, str, str, str]]:
    """(env, AMI, root snapshot, /var snapshot)."""
    with MotoEnv() as env:
        ebs = env.client("ebs", direct=True)
        root, _ = upload_image(ebs, split_disks[0], description="root")
        var, _ = upload_image(ebs, split_disks[1], description="var")
        more = [
            {"DeviceName": "/dev/sdb", "Ebs": {"SnapshotId": var}},
            {"DeviceName": "/dev/sdc", "VirtualName": "ephemeral0"},
        ]
        image_id = register_image(env.client("ec2"), root, name="imagelint-two-volumes", more=more)
        yield env, image_id, root, var


@pytest.fixture
def env(aws: tuple[MotoEnv, str, str, str]) -> Iterator[MotoEnv]:
    aws[0].ebs.reset()
    yield aws[0]
    aws[0].ebs.reset()


def test_every_snapshot_is_read_and_var_is_mounted_from_its_own(
    env: MotoEnv, aws: tuple[MotoEnv, str, str, str], faulty_tree_report: dict[str, Any], tmp_path: Path
) -> None:
    _, image_id, root, var = aws
    out = tmp_path / "ami.json"
    proc = run_cli("ami", image_id, "--mode", "snapshot", "-f", f"json:{out}", env=env.env, timeout=600)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(out.read_text())
    jsonschema.validate(report, report_schema())
    assert findings(report) == findings(faulty_tree_report)
    assert VAR_ONLY in {f["rule_id"] for f in report["findings"]}
    served = Counter(snapshot for snapshot, _ in env.ebs.snapshot_gets)
    volumes = report["facts"]["snapshot"]["volumes"]
    assert [(v["device_name"], v["kind"], v["status"]) for v in volumes] == [
        ("/dev/xvda", "ebs", "read"),
        ("/dev/sdb", "ebs", "read"),
        ("/dev/sdc", "instance store", "not read (not image content)"),
    ]
    assert [v.get("snapshot_id") for v in volumes] == [root, var, None]
    assert [v.get("blocks_fetched") for v in volumes[:2]] == [served[root], served[var]]
    assert served[root] > 0 and served[var] > 0
    assert report["facts"]["snapshot"]["snapshot_id"] == root  # the root's, as for one snapshot
    assert report["facts"]["disk"]["io"]["blocks_fetched"] == len(env.ebs.gets)  # both streams
    assert report["facts"]["disk"]["io"]["cache_bytes"] == 64 * 1024 * 1024  # one budget, shared
    mounts = {m["mountpoint"]: m for m in report["facts"]["disk"]["mounts"]}
    assert mounts["/var"]["status"] == "mounted" and mounts["/var"]["device"] == f"UUID={VAR_UUID}"
    assert mounts["/var"]["volume"] == f"/dev/sdb ({var}) disk"
    assert mounts["/tmp"]["status"].startswith("tmpfs")
    disks = {d["disk"]: d for d in report["facts"]["disk"]["disks"]}
    assert disks["/dev/sdc (ephemeral0)"]["status"] == "blank"
    assert disks[f"/dev/sdb ({var})"]["names"] == ["/dev/sdb", "/dev/xvdb"]
    assert f"/dev/sdb ebs:{var}: read {served[var]} of" in proc.stderr


def test_the_root_snapshot_alone_misses_what_var_holds(
    env: MotoEnv, aws: tuple[MotoEnv, str, str, str], tmp_path: Path
) -> None:
    """The fixture's fault is on the /var volume only: one snapshot read as a disk image records the
    /var mount as not in the image and audits the empty directory."""
    out = tmp_path / "root.json"
    proc = run_cli("audit", f"ebs:{aws[2]}", "-f", f"json:{out}", env=env.env, timeout=600)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(out.read_text())
    assert VAR_ONLY not in {f["rule_id"] for f in report["findings"]}
    mounts = {m["mountpoint"]: m for m in report["facts"]["disk"]["mounts"]}
    assert mounts["/var"]["status"] == "not in this image"


def test_an_unreadable_var_snapshot_is_inconclusive_naming_var(
    env: MotoEnv, aws: tuple[MotoEnv, str, str, str], tmp_path: Path
) -> None:
    _, image_id, root, var = aws
    env.ebs.denied = {var}
    out = tmp_path / "report.json"
    proc = run_cli("ami", image_id, "--mode", "snapshot", "-f", f"json:{out}", env=env.env, timeout=600)
    assert proc.returncode == 3, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("imagelint: error:")]
    assert len(lines) == 1, proc.stderr
    assert f"/var (UUID={VAR_UUID}) is mounted at boot but" in lines[0]
    assert f"/dev/sdb ({var}) could not be read" in lines[0] and "AccessDeniedException" in lines[0]
    assert "Traceback" not in proc.stderr
    assert not out.exists()  # no report that could pass for one
    assert {s for s, _ in env.ebs.snapshot_gets} <= {root}


def test_device_names_and_mappings() -> None:
    assert kernel_names("/dev/sdb") == kernel_names("/dev/xvdb") == ("/dev/sdb", "/dev/xvdb")
    assert kernel_names("/dev/sda1") == ("/dev/sda", "/dev/xvda")  # the classic root name: disk a
    assert kernel_names("/dev/nvme1n1") == ("/dev/nvme1n1",)
    raw = [
        {"DeviceName": "/dev/xvda", "Ebs": {"SnapshotId": "snap-0123456789abcdef0"}},
        {"DeviceName": "/dev/sdb", "Ebs": {"VolumeSize": 8}},
        {"DeviceName": "/dev/sdc", "VirtualName": "ephemeral0"},
        {"DeviceName": "/dev/sdd", "NoDevice": ""},
    ]
    assert [(m.device_name, m.kind, m.snapshot_id) for m in mappings_of(raw)] == [
        ("/dev/xvda", "ebs", "snap-0123456789abcdef0"),
        ("/dev/sdb", "empty ebs", None),
        ("/dev/sdc", "instance store", None),
        ("/dev/sdd", "no device", None),
    ]
