"""`imagelint ami` in a hardened account, against moto through the front: ``--resource-tag`` on every
resource the run creates (in the creating call, as an SCP requires), ``--volume-kms-key`` on every
volume, ``--permissions-boundary`` on --create-profile's role, and the RunInstances DryRun that comes
before anything exists. Each request is checked against botocore's model of its operation; what moto
keeps (tags, encryption, boundary) is read back while the resource exists."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.validate import ParamValidator

from imagelint.aws.ec2 import RUN_TAG
from tests.aws.conftest import Recorder
from tests.aws.moto_env import MotoEnv, dry_run
from tests.aws.test_kms import _one_error_line
from tests.support import run_cli

TAGS = (("CostCenter", "cc-42"), ("Name", "scp-named"))
WANTED = dict(TAGS)


@pytest.fixture
def moto_env() -> Iterator[MotoEnv]:
    """With AWS's managed policies: --create-profile attaches AmazonSSMManagedInstanceCore."""
    with MotoEnv(managed_policies=True) as env:
        yield env


def _tags(tags: list[dict[str, str]]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in tags}


def _carries(tags: list[dict[str, str]]) -> bool:
    """The --resource-tag tags and the run tag, all of them."""
    got = _tags(tags)
    return WANTED.items() <= got.items() and RUN_TAG in got


def _valid(recorded: Recorder) -> None:
    """Every request the flows made is valid for botocore's model of its operation."""
    session = botocore.session.get_session()
    for api, params in recorded.requests:
        service, operation = api.split(":")  # the signing name: the service's name for these
        shape = session.get_service_model(service).operation_model(operation).input_shape
        report = ParamValidator().validate(params, shape)
        assert not report.has_errors(), (api, report.generate_report())


def _watch(env: MotoEnv) -> dict[str, Any]:
    """What AWS has of the run's resources while they exist: at the real launch (the group, the role,
    the profile) and at termination (the instance's volumes); and the order of the create calls."""
    seen: dict[str, Any] = {"order": []}
    ec2, iam = env.client("ec2", direct=True), env.client("iam", direct=True)

    def launch(form: dict[str, list[str]]) -> None:
        if "UserData" not in form:  # the test's own (volume mode's runner)
            return
        seen["order"].append("DryRun" if dry_run(form) else "RunInstances")
        if dry_run(form):
            return
        group = form["SecurityGroupId.1"][0]
        seen["group"] = ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"][0]
        name = form["IamInstanceProfile.Name"][0]
        seen["role"] = iam.get_role(RoleName=name)["Role"]
        seen["profile_tags"] = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Tags"]

    def terminate(form: dict[str, list[str]]) -> None:
        ids = [v[0] for k, v in form.items() if k.startswith("InstanceId.")]
        volumes = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": ids}])["Volumes"]
        seen.setdefault("volumes", []).extend(volumes)

    def attach(form: dict[str, list[str]]) -> None:
        seen["attached"] = ec2.describe_volumes(VolumeIds=form["VolumeId"])["Volumes"][0]

    env.on_call.update(
        {
            "RunInstances": launch,
            "TerminateInstances": terminate,
            "AttachVolume": attach,
            "CreateSecurityGroup": lambda form: seen["order"].append("CreateSecurityGroup"),
            "CreateRole": lambda form: seen["order"].append("CreateRole"),
        }
    )
    return seen


def test_every_resource_the_run_creates_carries_the_tags_and_the_key(
    recorded: Recorder, moto_env: MotoEnv, sample_image: Path, tmp_path: Path
) -> None:
    from imagelint.aws.ec2 import LaunchSettings
    from imagelint.commands.ami import AmiOptions, Timing, run_ami
    from imagelint.session import RunOptions
    from tests.aws.test_ami_other import LocalTreeHost

    moto_env.agent.rootfs = sample_image
    key = moto_env.client("kms").create_key(Description="volumes")["KeyMetadata"]["Arn"]
    moto_env.client("kms").create_alias(AliasName="alias/imagelint-volumes", TargetKeyId=key)
    boundary = moto_env.client("iam").create_policy(
        PolicyName="imagelint-boundary",
        PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        ),
    )["Policy"]["Arn"]
    seen = _watch(moto_env)
    settings = LaunchSettings(instance_type="t3.micro", tags=TAGS, kms_key="alias/imagelint-volumes")
    options = AmiOptions(
        images=[moto_env.image_id],
        report_bucket=moto_env.bucket,
        launch=settings,
        create_profile=True,
        permissions_boundary=boundary,
        timing=Timing(poll=0.2, ssm_timeout=30),
        run=RunOptions(),
    )
    assert run_ami(options).value == "fail"  # the sample image's findings: the run went through

    # the DryRun came first, before the group and the role existed, and asked for the same launch
    assert seen["order"] == ["DryRun", "CreateRole", "CreateSecurityGroup", "RunInstances"]
    dry, real = recorded.made("ec2:RunInstances")
    assert dry.pop("DryRun") is True and "DryRun" not in real
    for params in (dry, real):  # botocore's idempotency token, new for each request
        params.pop("ClientToken")
    own = {
        "SecurityGroupIds": real.pop("SecurityGroupIds"),
        "IamInstanceProfile": real.pop("IamInstanceProfile"),
    }
    assert dry == real, "the DryRun differs from the launch in more than the run's own group and profile"
    assert own["IamInstanceProfile"]["Name"].startswith("imagelint-")
    # the requests: every create call carries the tags; every EBS mapping the key's ARN (not the alias)
    specs = {spec["ResourceType"]: spec["Tags"] for spec in real["TagSpecifications"]}
    assert set(specs) == {"instance", "volume", "network-interface"} and all(map(_carries, specs.values()))
    assert real["BlockDeviceMappings"] and all(
        m["Ebs"]["Encrypted"] is True and m["Ebs"]["KmsKeyId"] == key for m in real["BlockDeviceMappings"]
    )
    (group_call,) = recorded.made("ec2:CreateSecurityGroup")
    assert _carries(group_call["TagSpecifications"][0]["Tags"])
    (role_call,) = recorded.made("iam:CreateRole")
    (profile_call,) = recorded.made("iam:CreateInstanceProfile")
    assert _carries(role_call["Tags"]) and _carries(profile_call["Tags"])
    assert role_call["PermissionsBoundary"] == boundary
    # ... and what AWS (moto) made of them while they existed
    assert _carries(seen["group"]["Tags"])
    assert _carries(seen["role"]["Tags"]) and _carries(seen["profile_tags"])
    assert seen["role"]["PermissionsBoundary"]["PermissionsBoundaryArn"] == boundary
    (instance,) = moto_env.launched()
    described = moto_env.client("ec2").describe_instances(InstanceIds=[instance])["Reservations"][0]
    assert _carries(described["Instances"][0]["Tags"])
    assert seen["volumes"] and all(v["Encrypted"] and v["KmsKeyId"] == key for v in seen["volumes"])
    assert all(_carries(v["Tags"]) for v in seen["volumes"])

    # volume mode: its CreateVolume too
    ec2 = moto_env.client("ec2")
    runner = ec2.run_instances(ImageId=moto_env.image_id, MinCount=1, MaxCount=1)["Instances"][0]
    host = LocalTreeHost(runner["InstanceId"], runner["Placement"]["AvailabilityZone"], sample_image)
    volume = dataclasses.replace(options, mode="volume", create_profile=False, permissions_boundary=None)
    assert run_ami(volume, volume_host=host).value == "fail"
    (created,) = recorded.made("ec2:CreateVolume")
    assert created["Encrypted"] is True and created["KmsKeyId"] == key
    assert _carries(created["TagSpecifications"][0]["Tags"])
    attached = seen["attached"]
    assert attached["Encrypted"] and attached["KmsKeyId"] == key and _carries(attached["Tags"])
    _valid(recorded)
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}


def test_a_refused_dry_run_is_exit_3_with_aws_message_and_nothing_is_created(moto_env: MotoEnv) -> None:
    message = "You are not authorized to perform this operation. Encoded authorization failure message: x1"
    moto_env.refuse["RunInstances"] = ("UnauthorizedOperation", message)  # an SCP: the tag is missing
    proc = run_cli(
        "ami", moto_env.image_id, "--report-bucket", moto_env.bucket, "--create-profile",
        "--resource-tag", "CostCenter=cc-42", "--poll", "0.2s", "--soak", "0", env=moto_env.env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    line = _one_error_line(proc.stderr)
    assert "RunInstances (DryRun) failed: UnauthorizedOperation" in line and message in line
    assert "SCPs and tag policies" in line and "nothing was created" in line
    actions = [action for _, action in moto_env.seen_calls]
    assert actions.count("RunInstances") == 1  # the DryRun, and no launch after it
    assert not {"CreateRole", "CreateInstanceProfile", "CreateSecurityGroup"} & set(actions)
    assert moto_env.launched() == [] and moto_env.alive() == {"instances": [], "volumes": [], "groups": []}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--resource-tag", "CostCenter"], "--resource-tag 'CostCenter': give KEY=VALUE"),
        (["--resource-tag", "=v"], "give KEY=VALUE"),
        (["--resource-tag", "a=1", "--resource-tag", "a=2"], "--resource-tag a: given twice"),
        (["--resource-tag", "imagelint:run=x"], "the imagelint: prefix is the run's own"),
        (["--resource-tag", "aws:x=1"], "the aws: prefix is reserved"),
        (["--resource-tag", "k=a;b"], "has characters EC2 tags do not allow"),
        (["--resource-tag", f"k={'v' * 257}"], "value of 257 characters"),
        ([a for i in range(48) for a in ("--resource-tag", f"k{i}=v")], "EC2 allows 50 per resource"),
        (
            ["--instance-profile", "p", "--permissions-boundary", "arn:aws:iam::123456789012:policy/b"],
            "give --create-profile",
        ),
        (["--create-profile", "--permissions-boundary", "boundary"], "give a managed policy's ARN"),
        (["--mode", "snapshot", "--volume-kms-key", "alias/k"], "snapshot mode creates no volume"),
    ],
)
def test_bad_hardening_options_are_one_line_exit_2(args: list[str], says: str) -> None:
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
    proc = run_cli("ami", "ami-0123456789abcdef0", "--report-bucket", "b", *args, env=env)
    assert proc.returncode == 2, proc.stderr
    assert says in _one_error_line(proc.stderr)
