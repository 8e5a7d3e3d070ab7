"""Faults real AWS produces and moto does not, injected by the loopback front (tests/aws/moto_env.py),
against the CLI run as a user runs it; after each, nothing of the run is left alive
(``describe_instances`` / ``describe_volumes`` by the run tag)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.aws.moto_env import MotoEnv
from tests.support import run_cli, wait_for

pytestmark = pytest.mark.lane  # waits on the run's polls and timers more than it computes (tests/conftest.py)

FAST = ("--poll", "0.2s")
NOTHING = {"instances": [], "volumes": [], "groups": []}


def ami(
    env: MotoEnv, *args: str, soak: str = "0", extra_env: dict[str, str] | None = None, timeout: float = 180
):
    return run_cli(
        "ami",
        env.image_id,
        "--report-bucket",
        env.bucket,
        "--instance-profile",
        env.profile,
        *args,
        *FAST,
        "--soak",
        soak,
        env={**env.env, **(extra_env or {})},
        timeout=timeout,
    )


def test_not_found_right_after_create_is_retried(moto_env: MotoEnv, sample_image: Path, tmp_path: Path):
    moto_env.agent.rootfs = sample_image
    moto_env.not_found.update({"DescribeInstances": 3, "TerminateInstances": 1})
    out = tmp_path / "r.json"
    proc = ami(moto_env, "-f", f"json:{out}")
    assert proc.returncode == 1, proc.stderr  # the verdict of the image, not exit 3
    assert json.loads(out.read_text())["verdict"] == "fail"
    assert moto_env.not_found == {"DescribeInstances": 0, "TerminateInstances": 0}  # all were answered
    assert moto_env.alive() == NOTHING and len(moto_env.launched()) == 1


def test_not_found_after_create_volume_is_retried(
    moto_env: MotoEnv, sample_image: Path, monkeypatch, tmp_path
):
    from imagelint.commands.ami import AmiOptions, Timing, run_ami
    from tests.aws.test_ami_other import LocalTreeHost

    for key, value in moto_env.env.items():
        monkeypatch.setenv(key, value)
    ec2 = moto_env.client("ec2")
    runner = ec2.run_instances(ImageId=moto_env.image_id, MinCount=1, MaxCount=1)["Instances"][0]
    host = LocalTreeHost(runner["InstanceId"], runner["Placement"]["AvailabilityZone"], sample_image)
    moto_env.not_found["DescribeVolumes"] = 2
    verdict = run_ami(
        AmiOptions(images=[moto_env.image_id], mode="volume", timing=Timing(poll=0.2)), volume_host=host
    )
    assert verdict.value == "fail"
    assert moto_env.answered_not_found.count("DescribeVolumes") == 2
    assert moto_env.alive()["volumes"] == []


def test_tag_failure_is_a_warning_and_the_verdict_stands(
    moto_env: MotoEnv, sample_image: Path, tmp_path: Path
):
    moto_env.agent.rootfs = sample_image
    moto_env.refuse["CreateTags"] = (
        "TagLimitExceeded",
        "The maximum number of Tags for a resource has been reached.",
    )
    out = tmp_path / "r.json"
    proc = ami(moto_env, "--tag", "-f", f"json:{out}")
    assert proc.returncode == 1, proc.stderr
    assert json.loads(out.read_text())["verdict"] == "fail"  # written before the tagging
    assert "warning: could not tag" in proc.stderr and "TagLimitExceeded" in proc.stderr
    assert moto_env.alive() == NOTHING


def test_credentials_expiring_before_the_run_ends_are_refused_before_launch(moto_env: MotoEnv, sample_image):
    moto_env.agent.rootfs = sample_image
    soon = (datetime.now(UTC) + timedelta(minutes=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    session = {"AWS_SESSION_TOKEN": "token", "AWS_CREDENTIAL_EXPIRATION": soon}
    proc = ami(moto_env, extra_env=session)
    assert proc.returncode == 2, proc.stderr
    assert "expire in" in proc.stderr and "--role-arn" in proc.stderr
    assert moto_env.launched() == []
    # a token of unknown expiry counts as one hour: a run of 1 h 40 min is refused too
    proc = ami(moto_env, soak="1h", extra_env={"AWS_SESSION_TOKEN": "token"}, timeout=60)
    assert proc.returncode == 2 and "(assumed: session token of unknown expiry; say it in" in proc.stderr
    assert moto_env.launched() == []


def test_expired_credentials_mid_run_with_a_role_still_clean_up(moto_env: MotoEnv, sample_image: Path):
    """--role-arn: every EC2/SSM/S3 call runs on the assumed role's keys; the caller's own keys
    (which could expire the moment the role is assumed) are used for AssumeRole only."""
    moto_env.agent.rootfs = sample_image
    moto_env.seen_calls.clear()
    proc = ami(moto_env, "--role-arn", ROLE)
    assert proc.returncode == 1, proc.stderr
    _only_assume_role_used_the_callers_keys(moto_env)
    assert moto_env.alive() == NOTHING


ROLE = "arn:aws:iam::123456789012:role/imagelint"


def _only_assume_role_used_the_callers_keys(env: MotoEnv) -> None:
    callers = {action for key, action in env.seen_calls if not key.startswith("ASIA")}
    assert callers == {"AssumeRole"}, env.seen_calls  # every other call ran on the role's keys
    assert any(key.startswith("ASIA") for key, _ in env.seen_calls)


def test_fleet_with_a_role_runs_on_the_roles_keys(moto_env: MotoEnv, sample_image: Path):
    moto_env.agent.rootfs = sample_image
    tags = [{"ResourceType": "instance", "Tags": [{"Key": "Role", "Value": "gpu"}]}]
    moto_env.client("ec2").run_instances(
        ImageId=moto_env.image_id, MinCount=1, MaxCount=1, TagSpecifications=tags
    )
    moto_env.seen_calls.clear()
    proc = run_cli(
        "fleet", "--target", "tag:Role=gpu", "--report-bucket", moto_env.bucket, "--poll", "0.2s",
        "--role-arn", ROLE, env=moto_env.env, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # the sample image fails
    _only_assume_role_used_the_callers_keys(moto_env)


def _fleet(env: MotoEnv, *args: str, extra_env: dict[str, str] | None = None):
    return run_cli(
        "fleet", "--target", "tag:Role=none", "--report-bucket", env.bucket, *FAST, *args,
        env={**env.env, **(extra_env or {})},
    )  # fmt: skip


def _stamp(after: timedelta) -> str:
    return (datetime.now(UTC) + after).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_credentials_expire_at_is_what_the_run_is_checked_against(moto_env: MotoEnv):
    """A session token's expiry is unknown (one hour assumed); --credentials-expire-at (or
    AWS_CREDENTIAL_EXPIRATION) says it. No instance has the tag: a run let through ends at once (3)."""
    token = {"AWS_SESSION_TOKEN": "token-of-an-oidc-role"}
    refused = _fleet(moto_env, "--soak", "1h", extra_env=token)
    assert refused.returncode == 2 and "unknown expiry" in refused.stderr
    later = _fleet(
        moto_env, "--soak", "1h", "--credentials-expire-at", _stamp(timedelta(hours=3)), extra_env=token
    )
    assert later.returncode == 3 and "no running instance matched" in later.stdout, later.stderr
    # long-term keys have no limit, unless the user says when they end
    soon = _stamp(timedelta(minutes=10))
    for proc in (
        _fleet(moto_env, "--credentials-expire-at", soon),
        _fleet(moto_env, extra_env={"AWS_CREDENTIAL_EXPIRATION": soon}),
    ):
        assert proc.returncode == 2, proc.stderr
        assert "expire in" in proc.stderr and "(--credentials-expire-at)" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    bad = _fleet(moto_env, "--credentials-expire-at", "tomorrow")
    assert bad.returncode == 2 and "ISO 8601" in bad.stderr


def test_role_chaining_past_an_hour_is_refused_before_anything_runs(moto_env: MotoEnv):
    """The caller is itself a role session (a CI job's OIDC role): AWS caps the role it assumes at
    one hour, so a run that needs longer is refused with one line, exit 2; a shorter one runs."""
    creds = moto_env.client("sts").assume_role(RoleArn=f"{ROLE}-ci", RoleSessionName="gh")["Credentials"]
    chained = {
        "AWS_ACCESS_KEY_ID": creds["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": creds["SecretAccessKey"],
        "AWS_SESSION_TOKEN": creds["SessionToken"],
        "AWS_CREDENTIAL_EXPIRATION": creds["Expiration"].isoformat(),
    }
    proc = _fleet(moto_env, "--role-arn", ROLE, "--soak", "1h", extra_env=chained)
    assert proc.returncode == 2, proc.stderr
    assert "role chaining" in proc.stderr and ":assumed-role/" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    short = _fleet(moto_env, "--role-arn", ROLE, extra_env=chained)
    assert short.returncode == 3 and "role chaining" not in short.stderr, short.stderr


def test_cleanup_with_a_role_runs_on_the_roles_keys(moto_env: MotoEnv):
    past = [
        {"Key": "imagelint:run", "Value": "old-run"},
        {"Key": "imagelint:deadline", "Value": "2000-01-01T00:00:00Z"},
    ]
    tags = [{"ResourceType": "instance", "Tags": past}]
    moto_env.client("ec2").run_instances(
        ImageId=moto_env.image_id, MinCount=1, MaxCount=1, TagSpecifications=tags
    )
    moto_env.seen_calls.clear()
    proc = run_cli(
        "ami", "cleanup", "--older-than", "0s", "--poll", "0.2s", "--role-arn", ROLE, env=moto_env.env
    )
    assert proc.returncode == 0, proc.stderr
    assert "terminated" in proc.stdout
    _only_assume_role_used_the_callers_keys(moto_env)
    assert moto_env.alive() == NOTHING


def test_role_credentials_refresh_themselves(moto_env: MotoEnv, monkeypatch):
    from imagelint.aws.credentials import role_session

    for key, value in moto_env.env.items():
        monkeypatch.setenv(key, value)
    # 900 s, AssumeRole's minimum, is inside botocore's 15-minute refresh window: every use refreshes
    session = role_session("arn:aws:iam::123456789012:role/imagelint", 600, "us-east-1")
    first = session.get_credentials().get_frozen_credentials().access_key
    moto_env.expired_keys.add(first)
    ec2 = session.client("ec2")
    ec2.describe_instances()  # would be ExpiredToken on the first key
    assert moto_env.seen_keys[-1] != first


def test_sigkill_of_the_runner_then_cleanup_leaves_nothing(moto_env: MotoEnv, sample_image: Path):
    moto_env.agent.rootfs = sample_image
    moto_env.agent.fault = "hang"
    import shutil

    exe = shutil.which("imagelint", path=str(Path(sys.executable).parent))
    assert exe
    launch = ("--report-bucket", moto_env.bucket, "--instance-profile", moto_env.profile)
    proc = subprocess.Popen(
        [exe, "ami", moto_env.image_id, *launch, *FAST, "--soak", "0"],
        env={**os.environ, **moto_env.env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert wait_for(lambda: bool(moto_env.agent.invocations), timeout=60)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    (instance,) = moto_env.launched()
    assert moto_env.alive()["instances"] == [instance]  # the runner died before its cleanup
    (group,) = moto_env.alive()["groups"]  # and before deleting its security group
    # the instance carries the dead-man switch
    attr = moto_env.client("ec2").describe_instance_attribute(InstanceId=instance, Attribute="userData")
    assert "shutdown -P +" in base64.b64decode(attr["UserData"]["Value"]).decode()
    early = run_cli("ami", "cleanup", "--poll", "0.2s", env=moto_env.env, timeout=120)
    assert early.returncode == 0 and early.stdout == "", early.stderr  # before its deadline: left
    run_id = _run_of(moto_env, instance)
    cleanup = run_cli("ami", "cleanup", "--run", run_id, "--poll", "0.2s", env=moto_env.env, timeout=120)
    assert cleanup.returncode == 0, cleanup.stderr
    assert f"terminated {instance}" in cleanup.stdout
    assert f"deleted security group {group}" in cleanup.stdout
    assert moto_env.alive() == NOTHING


def _run_of(env: MotoEnv, instance: str) -> str:
    (found,) = env.client("ec2").describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"]
    return next(t["Value"] for t in found["Tags"] if t["Key"] == "imagelint:run")
