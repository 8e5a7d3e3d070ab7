"""scripts/find-baseline-report.sh with the real AWS CLI against moto: the report an AMI's
imagelint:report-sha256 tag names is found among other runs' reports."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from tests.aws.moto_env import MotoEnv
from tests.support import REPO

SCRIPT = REPO / "scripts/find-baseline-report.sh"


def _run(aws: MotoEnv, *args: str) -> subprocess.CompletedProcess:
    cli = shutil.which("aws", path=str(Path(sys.executable).parent))
    assert cli, "the AWS CLI is installed with the test extras"
    env = {**aws.env, "AWS": cli, "PATH": "/usr/bin:/bin"}
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120)


def test_the_tagged_report_is_found_among_others(tmp_path: Path) -> None:
    with MotoEnv() as aws:
        s3, ec2 = aws.client("s3"), aws.client("ec2")
        reports = {f"imagelint/run-{i}/report.json": f'{{"run": {i}}}\n'.encode() for i in range(3)}
        for key, body in reports.items():
            s3.put_object(Bucket=aws.bucket, Key=key, Body=body)
        s3.put_object(Bucket=aws.bucket, Key="imagelint/run-1/audit.json", Body=b"not the report")
        wanted = hashlib.sha256(reports["imagelint/run-1/report.json"]).hexdigest()
        ec2.create_tags(Resources=[aws.image_id], Tags=[{"Key": "imagelint:report-sha256", "Value": wanted}])
        dest = tmp_path / "baseline.json"
        proc = _run(aws, aws.image_id, aws.bucket, "imagelint/", str(dest))
        assert proc.returncode == 0, proc.stderr
        assert dest.read_bytes() == reports["imagelint/run-1/report.json"]
        assert "s3://" in proc.stderr and "run-1/report.json" in proc.stderr

        ec2.create_tags(
            Resources=[aws.image_id], Tags=[{"Key": "imagelint:report-sha256", "Value": "0" * 64}]
        )
        proc = _run(aws, aws.image_id, aws.bucket, "imagelint/", str(tmp_path / "none.json"))
        assert proc.returncode == 1 and "no report" in proc.stderr and not (tmp_path / "none.json").exists()
        ec2.delete_tags(Resources=[aws.image_id], Tags=[{"Key": "imagelint:report-sha256"}])
        proc = _run(aws, aws.image_id, aws.bucket, "imagelint/", str(tmp_path / "none.json"))
        assert proc.returncode == 1 and "no imagelint:report-sha256 tag" in proc.stderr
    assert subprocess.run(["bash", str(SCRIPT)], capture_output=True).returncode == 2


def test_no_argument_is_read_as_an_option(tmp_path: Path) -> None:
    """Each argument in turn is option-like: refused (exit 2) before any AWS call, nothing written."""
    good = ["ami-0123456789abcdef0", "bucket", "imagelint/", str(tmp_path / "dest.json")]
    for index in range(4):
        for value in ("-h", "--ignore=*", "--no-builtin-rules", "--config=/dev/null"):
            args = [*good[:index], value, *good[index + 1 :]]
            proc = subprocess.run(["bash", str(SCRIPT), *args], env={"PATH": "/usr/bin:/bin", "AWS": "false"},
                                  capture_output=True, text=True, timeout=60, cwd=tmp_path)  # fmt: skip
            assert proc.returncode == 2 and "starts with '-'" in proc.stderr, (args, proc.stderr)
    assert list(tmp_path.iterdir()) == []
