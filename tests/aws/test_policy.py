"""The IAM policies in `imagelint ami check --help` and the README parse as JSON, and every API the code
calls (recorded from real runs of every flow against moto, not listed by hand) is in the runner's."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from imagelint.aws import policy
from tests.aws.moto_env import MotoEnv
from tests.aws.test_ami_inputs import PACK
from tests.support import REPO, run_cli


def _json_documents(text: str) -> list[dict]:
    """Every top-level {...} JSON document in ``text`` (help output or Markdown)."""
    docs, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "{":
            depth, start = depth + 1, (i if depth == 0 else start)
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                with contextlib.suppress(ValueError):
                    docs.append(json.loads(text[start : i + 1]))
    return [d for d in docs if isinstance(d, dict) and "Statement" in d]


def _actions(doc: dict) -> set[str]:
    out: set[str] = set()
    for statement in doc["Statement"]:
        action = statement["Action"]
        out |= {action} if isinstance(action, str) else set(action)
    return out


@pytest.mark.parametrize("command", [["ami"], ["ami", "check"]], ids=" ".join)
def test_help_gives_the_policies_as_json(command: list[str]) -> None:
    from imagelint.aws.snapshot import IAM_POLICY

    proc = run_cli(*command, "--help", env={"COLUMNS": "200"})
    assert proc.returncode == 0
    docs = _json_documents(proc.stdout)
    # launch mode's runner, trust and instance policies; `check` has snapshot mode's smaller one too
    expected = [policy.runner_policy(), policy.INSTANCE_TRUST, policy.instance_role_policy()]
    expected += [IAM_POLICY] if command == ["ami", "check"] else []
    canonical = functools.partial(json.dumps, sort_keys=True)
    assert sorted(map(canonical, docs)) == sorted(map(canonical, expected))
    assert policy.SSM_MANAGED_POLICY in proc.stdout


def test_readme_gives_the_same_policies():
    docs = _json_documents((REPO / "README.md").read_text(encoding="utf-8"))
    assert policy.runner_policy() in docs
    assert policy.INSTANCE_TRUST in docs
    assert policy.instance_role_policy() in docs


@pytest.fixture
def moto_env() -> Iterator[MotoEnv]:
    """With AWS's managed policies: --create-profile attaches AmazonSSMManagedInstanceCore."""
    with MotoEnv(managed_policies=True) as env:
        yield env


class Recorder:
    def __init__(self) -> None:
        self.calls: set[str] = set()

    def __call__(self, model, **kwargs) -> None:
        prefix = model.service_model.signing_name
        api = f"{prefix}:{model.name}"
        self.calls.add(policy.ACTION_OF.get(api, api))


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch, moto_env: MotoEnv) -> Iterator[Recorder]:
    """Every boto3 session the code makes records its API calls; every URL it signs counts as the
    S3 action the URL performs (the instance acts with the signer's permission)."""
    from imagelint.aws import s3urls

    for key, value in moto_env.env.items():
        monkeypatch.setenv(key, value)
    recorder = Recorder()
    real = boto3.session.Session

    class Recording(real):  # type: ignore[misc,valid-type]
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.events.register("before-call", recorder)

    monkeypatch.setattr(boto3.session, "Session", Recording)
    sign = s3urls.Presigner._sign

    def signing(self, method, key, expires):
        recorder.calls.add({"get_object": "s3:GetObject", "put_object": "s3:PutObject"}[method])
        return sign(self, method, key, expires)

    monkeypatch.setattr(s3urls.Presigner, "_sign", signing)
    yield recorder


def test_every_call_of_every_flow_is_in_the_runner_policy(
    recorded: Recorder, moto_env: MotoEnv, sample_image: Path, tmp_path: Path
):
    from imagelint.aws.cleanup import run_cleanup
    from imagelint.aws.ec2 import LaunchSettings
    from imagelint.commands.ami import AmiOptions, Timing, run_ami
    from imagelint.commands.fleet import FleetOptions, run_fleet
    from imagelint.session import OutputSpec, RunOptions
    from tests.aws.test_ami_other import LocalTreeHost

    moto_env.agent.rootfs = sample_image
    pack = tmp_path / "pack.yaml"
    pack.write_text(PACK.format(id="X950", name="policy-marker", path="/etc/hostname"), encoding="utf-8")
    run = RunOptions(outputs=[OutputSpec("json", tmp_path / "r.json")], extra_rules=[pack])
    timing = Timing(poll=0.2, ssm_timeout=30)
    launch = AmiOptions(
        images=[moto_env.image_id],
        report_bucket=moto_env.bucket,
        launch=LaunchSettings(instance_type="t3.micro", instance_profile=moto_env.profile),
        tag=True,
        on_fail="deregister",
        timing=timing,
        run=run,
    )
    # with a role and profile made for the run (and their removal); before --on-fail deregisters the AMI
    made = dataclasses.replace(
        launch, launch=LaunchSettings(instance_type="t3.micro"), create_profile=True, on_fail="none"
    )
    assert run_ami(made).value == "fail"
    assert run_ami(launch).value == "fail"
    # volume mode on a fresh image (moto has no EnableImageDeprecation: test_contract covers it)
    ec2 = moto_env.client("ec2")
    runner = ec2.run_instances(ImageId=moto_env.image_id, MinCount=1, MaxCount=1)["Instances"][0]
    image = ec2.create_image(InstanceId=runner["InstanceId"], Name="second")["ImageId"]
    host = LocalTreeHost(runner["InstanceId"], runner["Placement"]["AvailabilityZone"], sample_image)
    volume = AmiOptions(images=[image], mode="volume", timing=timing, run=run)
    assert run_ami(volume, volume_host=host).value == "fail"
    ec2.create_tags(Resources=[runner["InstanceId"]], Tags=[{"Key": "Role", "Value": "web"}])
    fleet = FleetOptions(target="tag:Role=web", report_bucket=moto_env.bucket, poll=0.2, run=run)
    assert run_fleet(fleet).value == "fail"
    ec2.run_instances(
        ImageId=moto_env.image_id,
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "imagelint:run", "Value": "x"}]}],
    )
    assert run_cleanup(None, 0, dry_run=False, poll=0.2)
    # the recorder saw the flows' own calls (not only the test's)
    assert {
        "ec2:RunInstances",
        "ssm:SendCommand",
        "iam:GetInstanceProfile",
        "s3:ListBucket",
    } <= recorded.calls
    assert {"ec2:AttachVolume", "ec2:DeregisterImage", "ssm:ListCommands"} <= recorded.calls
    assert "ssm:DescribeInstanceInformation" in recorded.calls
    network = {"ec2:DescribeRouteTables", "ec2:DescribeVpcEndpoints", "ec2:CreateSecurityGroup"}
    assert {
        "iam:CreateRole",
        "iam:AddRoleToInstanceProfile",
        "iam:DeleteRole",
        "iam:ListRoles",
    } <= recorded.calls
    assert network | {"ec2:AuthorizeSecurityGroupEgress", "ec2:DeleteSecurityGroup"} <= recorded.calls
    allowed = _actions(policy.runner_policy())
    test_only = {"ec2:CreateImage"}
    missing = recorded.calls - allowed - test_only
    assert not missing, f"called but not in the runner policy: {sorted(missing)}"


def test_role_arn_needs_only_sts_assume_role(recorded: Recorder, moto_env: MotoEnv):
    from imagelint.aws.credentials import role_session

    session = role_session("arn:aws:iam::123456789012:role/imagelint", 3600, "us-east-1")
    assert session.get_credentials().get_frozen_credentials().token
    assert "sts:AssumeRole" in recorded.calls
    assert re.fullmatch(r"sts:AssumeRole", next(c for c in recorded.calls if c.startswith("sts:")))
