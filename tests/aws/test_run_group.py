"""The run's own security group (imagelint/aws/run_group.py) against moto, through the SSM front: in a
hardened account (Security Hub EC2.2: the VPC's default group has no rule at all) the run makes its own
HTTPS-egress-only group, launches with it and deletes it, on success, failure and SIGTERM alike; a
group the terminated instance's interface still holds is retried, then left for `ami cleanup`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.aws.moto_env import MotoEnv, dry_run
from tests.support import run_cli

pytestmark = pytest.mark.lane  # waits on the run's polls and timers more than it computes (tests/conftest.py)

FAST = ("--poll", "0.2s", "--soak", "0")


def _harden(env: MotoEnv) -> dict[str, Any]:
    """EC2.2: the default VPC's default group loses its allow-all egress rule (it has no ingress)."""
    ec2 = env.client("ec2", direct=True)
    (group,) = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": ["default"]}])[
        "SecurityGroups"
    ]
    ec2.revoke_security_group_egress(GroupId=group["GroupId"], IpPermissions=group["IpPermissionsEgress"])
    (group,) = ec2.describe_security_groups(GroupIds=[group["GroupId"]])["SecurityGroups"]
    assert group["IpPermissionsEgress"] == [] and group["IpPermissions"] == []
    return dict(group)


def _at_launch(env: MotoEnv) -> list[dict[str, Any]]:
    """The groups each RunInstances names, as EC2 has them at that moment."""
    seen: list[dict[str, Any]] = []

    def record(form: dict[str, list[str]]) -> None:
        if dry_run(form):  # the pre-flight, before the group exists
            return
        ids = [v[0] for k, v in sorted(form.items()) if k.startswith("SecurityGroupId.")]
        groups = env.client("ec2", direct=True).describe_security_groups(GroupIds=ids)["SecurityGroups"]
        seen.append({"ids": ids, "groups": groups})

    env.on_call["RunInstances"] = record
    return seen


def _calls(env: MotoEnv, action: str) -> int:
    return sum(a == action for _, a in env.seen_calls)


def _ami(env: MotoEnv, *args: str, timeout: float = 120):
    return run_cli(
        "ami", env.image_id, "--report-bucket", env.bucket, "--instance-profile", env.profile, *FAST, *args,
        env=env.env, timeout=timeout,
    )  # fmt: skip


def test_hardened_default_group_the_run_uses_its_own_https_only_group_and_removes_it(
    moto_env: MotoEnv, sample_image: Path, tmp_path: Path
) -> None:
    moto_env.agent.rootfs = sample_image
    default = _harden(moto_env)
    launches = _at_launch(moto_env)
    out = tmp_path / "r.json"
    proc = _ami(moto_env, "-f", f"json:{out}")
    assert proc.returncode == 1, proc.stderr  # the image's findings: the run itself went through
    run_id = json.loads(out.read_text())["target"]["run_id"]
    ((launch,),) = [launches]
    (group,) = launch["groups"]
    assert launch["ids"] == [group["GroupId"]] and group["GroupId"] != default["GroupId"]
    assert group["GroupName"] == f"imagelint-{run_id}" and group["VpcId"] == default["VpcId"]
    tags = {t["Key"]: t["Value"] for t in group["Tags"]}
    assert tags["imagelint:run"] == run_id and tags["imagelint:deadline"].endswith("Z")
    assert group["IpPermissions"] == []  # no ingress
    (egress,) = group["IpPermissionsEgress"]  # the allow-all rule it started with is gone
    assert (egress["IpProtocol"], egress["FromPort"], egress["ToPort"]) == ("tcp", 443, 443)
    assert [r["CidrIp"] for r in egress["IpRanges"]] == ["0.0.0.0/0"]
    assert [r["CidrIpv6"] for r in egress["Ipv6Ranges"]] == ["::/0"]
    # the instance was launched in it, and the group is gone after the instance
    (instance,) = moto_env.launched()
    described = moto_env.client("ec2").describe_instances(InstanceIds=[instance])["Reservations"][0]
    assert [g["GroupId"] for g in described["Instances"][0]["SecurityGroups"]] == [group["GroupId"]]
    assert f"deleted security group {group['GroupId']}" in proc.stderr
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}
    # the VPC's default group was not touched
    (after,) = moto_env.client("ec2").describe_security_groups(GroupIds=[default["GroupId"]])[
        "SecurityGroups"
    ]
    assert after["IpPermissionsEgress"] == [] and after["IpPermissions"] == []


def test_a_group_still_held_after_termination_is_retried_until_deleted(
    moto_env: MotoEnv, sample_image: Path
) -> None:
    moto_env.agent.rootfs = sample_image
    moto_env.group_held = 3  # the terminated instance's interface holds the group for three more tries
    proc = _ami(moto_env)
    assert proc.returncode == 1, proc.stderr
    assert moto_env.group_held == 0 and _calls(moto_env, "DeleteSecurityGroup") == 4
    assert "deleted security group sg-" in proc.stderr
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}


@pytest.mark.parametrize("fault", ["ssm-never-online", "command-fails"])
def test_failed_runs_remove_their_group(moto_env: MotoEnv, sample_image: Path, fault: str) -> None:
    moto_env.agent.rootfs = sample_image
    _harden(moto_env)
    if fault == "ssm-never-online":
        moto_env.agent.online = False
    else:
        moto_env.agent.fault = fault
    proc = _ami(moto_env, "--ssm-timeout", "2s")
    assert proc.returncode == 3, proc.stderr
    assert _calls(moto_env, "CreateSecurityGroup") == 1 and len(moto_env.launched()) == 1
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}


def test_a_failing_rule_call_after_the_create_still_removes_the_group(moto_env: MotoEnv) -> None:
    """The group carries the run tag from its create call: the final sweep finds it although the
    run never learnt more than its id, and nothing is launched."""
    moto_env.refuse["AuthorizeSecurityGroupEgress"] = ("UnauthorizedOperation", "You are not authorized")
    proc = _ami(moto_env)
    assert proc.returncode == 3, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "AuthorizeSecurityGroupEgress failed: UnauthorizedOperation" in last, last
    assert moto_env.launched() == []
    assert _calls(moto_env, "CreateSecurityGroup") == 1
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}


def test_sigterm_mid_soak_removes_the_group(moto_env: MotoEnv, sample_image: Path) -> None:
    moto_env.agent.rootfs = sample_image
    _harden(moto_env)
    code, err = moto_env.sigterm_while_soaking(
        "ami", moto_env.image_id, "--report-bucket", moto_env.bucket, "--instance-profile", moto_env.profile,
        "--poll", "0.2s", "--soak", "60s", "--soak-interval", "1s",
    )  # fmt: skip
    assert code == 3, err
    assert "interrupted by SIGTERM" in err and "deleted security group sg-" in err
    assert _calls(moto_env, "CreateSecurityGroup") == 1
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}


def test_given_security_group_is_used_and_none_is_made(moto_env: MotoEnv, sample_image: Path) -> None:
    moto_env.agent.rootfs = sample_image
    ec2 = moto_env.client("ec2")
    vpc = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    mine = ec2.create_security_group(GroupName="team-egress", Description="team", VpcId=vpc)["GroupId"]
    launches = _at_launch(moto_env)
    proc = _ami(moto_env, "--security-group", mine)
    assert proc.returncode == 1, proc.stderr
    assert [launch["ids"] for launch in launches] == [[mine]]
    assert _calls(moto_env, "CreateSecurityGroup") == 1  # the test's own, above
    assert ec2.describe_security_groups(GroupIds=[mine])["SecurityGroups"]  # not the run's to delete


def test_a_group_held_too_long_is_a_warning_and_cleanup_removes_it_later(
    moto_env: MotoEnv,
    sample_image: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    from imagelint.aws.cleanup import run_cleanup
    from imagelint.aws.ec2 import LaunchSettings
    from imagelint.commands.ami import AmiOptions, Timing, run_ami
    from imagelint.formats.outputs import OutputSpec
    from imagelint.session import RunOptions

    for key, value in moto_env.env.items():
        monkeypatch.setenv(key, value)
    moto_env.agent.rootfs = sample_image
    moto_env.group_held = 10**6  # held for longer than the run waits
    options = AmiOptions(
        images=[moto_env.image_id],
        report_bucket=moto_env.bucket,
        launch=LaunchSettings(instance_profile=moto_env.profile),
        timing=Timing(poll=0.2, ssm_timeout=30, group_wait=1.0),
        run=RunOptions(outputs=[OutputSpec("json", tmp_path / "r.json")]),
    )
    assert run_ami(options).value == "fail"  # the verdict stands
    (group,) = moto_env.alive()["groups"]
    assert moto_env.alive()["instances"] == []
    assert f"warning: security group {group} is still in use after 1s" in capfd.readouterr().err
    moto_env.group_held = 0  # the interface is gone now
    run_id = json.loads((tmp_path / "r.json").read_text())["target"]["run_id"]
    assert run_cleanup(None, 0, dry_run=True, poll=0.2) == []  # before the run's deadline
    assert run_cleanup(None, 0, dry_run=True, poll=0.2, run=run_id) == [
        f"would delete security group {group} (run {run_id})"
    ]
    lines = run_cleanup(None, 0, dry_run=False, poll=0.2, run=run_id)
    assert lines[-1].startswith(f"deleted security group {group}")
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}
