"""`imagelint ami` in launch mode against a local AWS, run as a user runs it (a separate process)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.aws.moto_env import MotoEnv
from tests.support import run_cli

FAST = ("--poll", "0.2s", "--soak", "0")


def ami(env: MotoEnv, *args: str, timeout: float = 120, profile: bool = True):
    given = ("--instance-profile", env.profile) if profile and "--instance-profile" not in args else ()
    return run_cli("ami", *args, *given, *FAST, env=env.env, timeout=timeout)


def test_faulty_image_fails_is_tagged_and_nothing_is_left(
    moto_env: MotoEnv, sample_image: Path, tmp_path: Path
) -> None:
    moto_env.agent.rootfs = sample_image
    out = tmp_path / "report.json"
    proc = ami(moto_env, moto_env.image_id, "--report-bucket", moto_env.bucket, "--tag", "-f", f"json:{out}")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(out.read_text())
    assert report["target"]["kind"] == "ami" and report["target"]["image_id"] == moto_env.image_id
    assert report["verdict"] == "fail"
    assert "IL101" in {f["rule_id"] for f in report["findings"]}
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}
    assert len(moto_env.launched()) == 1


def _tags(env: MotoEnv, resource: str) -> dict[str, str]:
    reply = env.client("ec2").describe_tags(Filters=[{"Name": "resource-id", "Values": [resource]}])
    return {t["Key"]: t["Value"] for t in reply["Tags"]}


def test_tags_and_report_in_s3_agree(moto_env: MotoEnv, sample_image: Path) -> None:
    import hashlib

    moto_env.agent.rootfs = sample_image
    proc = ami(moto_env, moto_env.image_id, "--report-bucket", moto_env.bucket, "--tag")
    assert proc.returncode == 1, proc.stderr
    tags = _tags(moto_env, moto_env.image_id)
    assert tags["imagelint:verdict"] == "fail"
    s3 = moto_env.client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=moto_env.bucket)["Contents"]]
    final = [k for k in keys if k.endswith("/report.json")]
    assert len(final) == 1
    body = s3.get_object(Bucket=moto_env.bucket, Key=final[0])["Body"].read()
    assert hashlib.sha256(body).hexdigest() == tags["imagelint:report-sha256"]
    snapshot = moto_env.client("ec2").describe_images(ImageIds=[moto_env.image_id])["Images"][0]
    snap_id = snapshot["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
    assert _tags(moto_env, snap_id)["imagelint:verdict"] == "fail"
    # no SSM output in S3 (the agent would write it with the instance's role, which has no S3 write):
    # the run's objects are the pre-flight's run.json and the report (the instance's bundle is
    # deleted once read: it holds the image's /etc/shadow)
    assert not any(k.endswith("/stdout") for k in keys)
    assert sorted(k.rsplit("/", 1)[1] for k in keys) == ["report.json", "run.json"]


def test_clean_image_passes(moto_env: MotoEnv, clean_rootfs: Path) -> None:
    moto_env.agent.rootfs = clean_rootfs
    proc = ami(moto_env, moto_env.image_id, "--report-bucket", moto_env.bucket, "--tag")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _tags(moto_env, moto_env.image_id)["imagelint:verdict"] == "pass"
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}


def test_missing_instance_profile_is_caught_before_launch(moto_env: MotoEnv, sample_image: Path) -> None:
    moto_env.agent.rootfs = sample_image
    proc = ami(
        moto_env, moto_env.image_id, "--report-bucket", moto_env.bucket, "--instance-profile", "no-such"
    )
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("imagelint: error: --instance-profile no-such: no such instance profile")
    assert moto_env.launched() == []


def test_launch_without_instance_profile_is_refused_before_any_aws_call(moto_env: MotoEnv) -> None:
    before = len(moto_env.seen_calls)
    proc = ami(moto_env, moto_env.image_id, "--report-bucket", moto_env.bucket, profile=False)
    assert moto_env.seen_calls[before:] == []  # refused before the first request (DescribeImages too)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "imagelint: error: launch mode needs --instance-profile (or --create-profile): without a role the "
        "instance's SSM agent never registers; `imagelint ami check --help` has the role's policies"
    ]
    assert moto_env.launched() == []


def test_ssm_never_online_times_out_exit_3_and_terminates(moto_env: MotoEnv, sample_image: Path) -> None:
    moto_env.agent.rootfs = sample_image
    moto_env.agent.online = False
    proc = ami(
        moto_env, moto_env.image_id, "--report-bucket", moto_env.bucket, "--ssm-timeout", "2s", "--tag"
    )
    assert proc.returncode == 3
    assert "never registered with SSM" in proc.stderr
    assert "console output" in proc.stderr.strip().splitlines()[-1]  # GetConsoleOutput's, or "no … yet"
    assert len(moto_env.launched()) == 1  # it did launch one ...
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}  # ... and terminated it
    assert "imagelint:verdict" not in _tags(moto_env, moto_env.image_id)


def test_command_failure_exit_3_names_the_status(moto_env: MotoEnv, sample_image: Path) -> None:
    moto_env.agent.rootfs = sample_image
    moto_env.agent.fault = "command-fails"
    proc = ami(moto_env, moto_env.image_id, "--report-bucket", moto_env.bucket)
    assert proc.returncode == 3
    assert "command Failed, exit code 94" in proc.stderr and "collection failed" in proc.stderr
    assert len(moto_env.launched()) == 1
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}


def test_empty_or_malformed_report_exit_3(moto_env: MotoEnv, sample_image: Path) -> None:
    moto_env.agent.rootfs = sample_image
    for fault in ("empty-report", "malformed-report"):
        moto_env.agent.fault = fault
        proc = ami(moto_env, moto_env.image_id, "--report-bucket", moto_env.bucket)
        assert proc.returncode == 3, (fault, proc.stderr)
        assert "not a readable tar archive" in proc.stderr
    assert len(moto_env.launched()) == 2
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}


def test_sigterm_mid_soak_cancels_terminates_exit_3(moto_env: MotoEnv, sample_image: Path) -> None:
    moto_env.agent.rootfs = sample_image
    code, err = moto_env.sigterm_while_soaking(
        "ami", moto_env.image_id, "--report-bucket", moto_env.bucket, "--poll", "0.2s",
        "--instance-profile", moto_env.profile,
        "--soak", "60s", "--soak-interval", "1s",
    )  # fmt: skip
    assert code == 3, err
    assert "interrupted by SIGTERM" in err
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}
    statuses = {i.status for i in moto_env.agent.invocations.values()}
    assert statuses == {"Cancelled"}
