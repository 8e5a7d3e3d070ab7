"""The IAM policies in `imagelint ami check --help` and the docs parse as JSON, and every API the code
calls (recorded from real runs of every flow against moto, not listed by hand) is in the runner's."""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from imagelint.aws import ec2 as ec2_ops
from imagelint.aws import kms, policy
from imagelint.aws.kms import IMPLICIT_KMS
from imagelint.aws.policy_fill import Fill, documents
from tests.aws import iam_eval
from tests.aws.conftest import Recorder
from tests.aws.ebs_upload import encrypted_image
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


# conditions a request the caller makes itself never meets: only AWS services' calls on its behalf
_ON_BEHALF = {"kms:ViaService", "kms:GrantIsForAWSResource"}


def _actions(doc: dict, *, direct: bool = False) -> set[str]:
    """The actions the statements of ``doc`` name (``direct``: only in statements a call the caller
    makes itself can meet; the tag conditions are checked against the requests separately)."""
    out: set[str] = set()
    for statement in doc["Statement"]:
        keys = {k for test in statement.get("Condition", {}).values() for k in test}
        if direct and keys & _ON_BEHALF:
            continue
        action = statement["Action"]
        out |= {action} if isinstance(action, str) else set(action)
    return out


def _allowed(action: str, actions: set[str]) -> bool:
    """IAM's match: ``*`` and ``?`` wildcards, case-insensitive."""
    return any(fnmatch.fnmatchcase(action.lower(), pattern.lower()) for pattern in actions)


def test_ami_policies_prints_every_document_from_the_code() -> None:
    from imagelint.aws.snapshot import IAM_POLICY

    proc = run_cli("ami", "policies")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "runner": policy.runner_policy(),
        "instance-trust": policy.INSTANCE_TRUST,
        "instance-role-managed-policy": policy.SSM_MANAGED_POLICY,
        "snapshot-mode": IAM_POLICY,
    }
    one = run_cli("ami", "policies", "runner")
    assert one.returncode == 0 and json.loads(one.stdout) == policy.runner_policy()
    unknown = run_cli("ami", "policies", "admin")
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1 and "runner" in unknown.stderr


@pytest.mark.parametrize("command", [["ami"], ["ami", "check"]], ids=" ".join)
def test_help_names_the_policies_command(command: list[str]) -> None:
    proc = run_cli(*command, "--help")
    assert proc.returncode == 0 and "imagelint ami policies" in proc.stdout


def test_docs_give_the_same_policies():
    docs = _json_documents((REPO / "docs" / "reference" / "iam-policies.md").read_text(encoding="utf-8"))
    assert policy.runner_policy() in docs
    assert policy.INSTANCE_TRUST in docs


@pytest.fixture
def moto_env() -> Iterator[MotoEnv]:
    """With AWS's managed policies: --create-profile attaches AmazonSSMManagedInstanceCore."""
    with MotoEnv(managed_policies=True) as env:
        yield env


def test_every_call_of_every_flow_is_in_the_runner_policy(
    recorded: Recorder, moto_env: MotoEnv, sample_image: Path, tmp_path: Path
):
    from imagelint.aws.cleanup import run_cleanup
    from imagelint.aws.ec2 import LaunchSettings
    from imagelint.commands.ami import AmiOptions, Timing, run_ami
    from imagelint.commands.fleet import FleetOptions, run_fleet
    from imagelint.formats.outputs import OutputSpec
    from imagelint.session import RunOptions
    from tests.aws.test_ami_other import LocalTreeHost

    moto_env.agent.rootfs = sample_image
    pack = tmp_path / "pack.yaml"
    pack.write_text(PACK.format(id="X950", name="policy-marker", path="/etc/hostname"), encoding="utf-8")
    run = RunOptions(outputs=[OutputSpec("json", tmp_path / "r.json")], extra_rules=[pack])
    timing = Timing(poll=0.2, ssm_timeout=30)
    candidate = _candidate_image(moto_env)  # this account's, carrying the candidate tag (--on-fail's)
    launch = AmiOptions(
        images=[candidate],
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
    # a hardened account: EBS encryption by default with a customer managed key, tags an SCP requires
    # (on the role and profile too), a permissions boundary, the volumes under a chosen key
    _hardened_flow(moto_env, made)
    assert run_ami(launch).value == "fail"
    # volume mode on a fresh image (moto has no EnableImageDeprecation: test_contract covers it)
    # ... on an AMI whose snapshot is encrypted with a customer managed key (the KMS pre-flight)
    ec2 = moto_env.client("ec2")
    runner = ec2.run_instances(ImageId=moto_env.image_id, MinCount=1, MaxCount=1)["Instances"][0]
    image, _, _ = encrypted_image(moto_env)
    _make_candidate(moto_env, image)  # volume mode makes volumes only from candidates' snapshots
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
        TagSpecifications=[{"ResourceType": "instance", "Tags": ec2_ops.run_tags("x")}],
    )
    # a killed run's instance and role (`ami cleanup --run`: tags read, then removed)
    from imagelint.aws.run_profile import create_run_profile

    create_run_profile(moto_env.client("iam"), "x")
    assert run_cleanup(None, 0, dry_run=False, poll=0.2, run="x")
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
    assert {"ec2:DescribeSnapshots", "kms:DescribeKey"} <= recorded.calls
    # what the test itself does to set the scene (an image, an encrypted copy, a key)
    test_only = {
        "ec2:CreateImage",
        "ec2:CreateSnapshot",
        "ec2:CopySnapshot",
        "ec2:RegisterImage",
        "kms:CreateKey",
    }
    direct = _actions(policy.runner_policy(), direct=True)
    missing = {c for c in recorded.calls - test_only - policy.NO_PERMISSION if not _allowed(c, direct)}
    assert not missing, f"called but not in the runner policy: {sorted(missing)}"
    # ... and what EC2 does with the runner's permissions for an encrypted snapshot
    _check_tag_conditions(recorded, moto_env)
    _check_scoped_requests(recorded)
    implicit = {k for call in recorded.calls for k in IMPLICIT_KMS.get(call, ())}
    assert {"kms:CreateGrant", "kms:Decrypt"} <= implicit
    assert not {k for k in implicit if not _allowed(k, allowed)}, implicit
    _check_hardened_permissions(recorded)


def _hardened_flow(env: MotoEnv, made: Any) -> None:
    from imagelint.aws.ec2 import LaunchSettings
    from imagelint.commands.ami import run_ami

    kms, ec2 = env.client("kms"), env.client("ec2", direct=True)
    env.ebs_default_key = kms.create_key(Description="account default")["KeyMetadata"]["Arn"]
    volumes = kms.create_key(Description="volumes")["KeyMetadata"]["Arn"]
    boundary = env.client("iam").create_policy(
        PolicyName="boundary",
        PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        ),
    )["Policy"]["Arn"]
    tags = (("CostCenter", "cc-42"),)
    ec2.enable_ebs_encryption_by_default()
    try:
        settings = LaunchSettings(instance_type="t3.micro", tags=tags)
        hardened = dataclasses.replace(made, launch=settings, permissions_boundary=boundary)
        assert run_ami(hardened).value == "fail"
        keyed = dataclasses.replace(settings, kms_key=volumes)
        assert run_ami(dataclasses.replace(made, launch=keyed)).value == "fail"
    finally:
        ec2.disable_ebs_encryption_by_default()


def _granting(action: str) -> list[dict[str, Any]]:
    return [s for s in policy.runner_policy()["Statement"] if _allowed(action, set(s["Action"]))]


def _check_hardened_permissions(recorded: Recorder) -> None:
    """What AWS checks besides the called action when a request carries tags or a boundary: IAM's
    iam:TagRole / iam:TagInstanceProfile for Tags in CreateRole / CreateInstanceProfile, EC2's
    ec2:CreateTags (ec2:CreateAction RunInstances) on the network interface it tags, and
    CreateRole's iam:PermissionsBoundary condition (AWS's documented way to require a boundary)."""
    assert {"ec2:GetEbsEncryptionByDefault", "ec2:GetEbsDefaultKmsKeyId"} <= recorded.calls
    roles = [p for p in recorded.made("iam:CreateRole") if "Tags" in p]
    profiles = [p for p in recorded.made("iam:CreateInstanceProfile") if "Tags" in p]
    assert roles and profiles and _granting("iam:TagRole") and _granting("iam:TagInstanceProfile")
    bounded = [p for p in recorded.made("iam:CreateRole") if "PermissionsBoundary" in p]
    assert bounded and any(
        "iam:PermissionsBoundary" in s.get("Condition", {}).get("StringEquals", {})
        for s in _granting("iam:CreateRole")
    )
    interfaces = [
        p
        for p in recorded.made("ec2:RunInstances")
        if any(t["ResourceType"] == "network-interface" for t in p.get("TagSpecifications", []))
    ]
    assert interfaces and any(
        "network-interface" in str(s["Resource"])
        and s.get("Condition") == {"StringEquals": {"ec2:CreateAction": "RunInstances"}}
        for s in _granting("ec2:CreateTags")
    )


def test_the_implicit_kms_actions_are_in_the_printed_policies() -> None:
    """Every call the table names, and what AWS does with the caller's KMS permissions for it, is in
    the policy of the mode that makes the call: the runner's (launch, volume) or snapshot mode's."""
    from imagelint.aws.snapshot import IAM_POLICY

    runner, snapshot = _actions(policy.runner_policy()), _actions(IAM_POLICY)
    for call, kms_actions in IMPLICIT_KMS.items():
        doc = snapshot if call.startswith("ebs:") else runner
        assert _allowed(call, doc), call
        assert all(_allowed(a, doc) for a in kms_actions), (call, kms_actions)
    # the pre-flight's own calls are allowed without a condition; the ones EC2 makes only through it
    assert _allowed("kms:DescribeKey", _actions(policy.runner_policy(), direct=True))
    assert _allowed("kms:DescribeKey", _actions(IAM_POLICY, direct=True))
    assert not _allowed("kms:Decrypt", _actions(policy.runner_policy(), direct=True))
    grant = next(s for s in policy.runner_policy()["Statement"] if "kms:CreateGrant" in s["Action"])
    assert grant["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": "true"}}
    assert set(kms.LAUNCH) <= runner and set(kms.READ) <= snapshot


def test_a_snapshot_mode_refusal_calls_only_what_its_policy_allows(recorded: Recorder, moto_env: MotoEnv):
    """Snapshot mode's pre-flight (owner, key) is covered by snapshot mode's policy."""
    from imagelint.aws.snapshot import IAM_POLICY
    from imagelint.commands.ami import AmiOptions, run_ami
    from imagelint.errors import UsageError

    with pytest.raises(UsageError, match="owned by account"):
        run_ami(AmiOptions(images=[moto_env.image_id], mode="snapshot"))
    assert {"ec2:DescribeImages", "ec2:DescribeSnapshots"} <= recorded.calls
    allowed = _actions(IAM_POLICY, direct=True)
    assert not {c for c in recorded.calls - policy.NO_PERMISSION if not _allowed(c, allowed)}


CANDIDATE_TAG = ("stage", "candidate")
FILLED = Fill(
    report_bucket="imagelint-test-reports",
    account=iam_eval.ACCOUNT,
    candidate_tag="=".join(CANDIDATE_TAG),
    fleet_tag="Role=web",
    role_arn="arn:aws:iam::123456789012:role/imagelint",
)
# the statements that scope a call by its resource (the evaluator's requests): each allows one recorded
SCOPED = {
    "ImagelintSendDocument",
    "ImagelintSendRunInstance",
    "ImagelintSendFleetInstance",
    "ImagelintReportBucket",
    "ImagelintReports",
    "ImagelintVerdictTags",
    "ImagelintOnFail",
    "ImagelintVolumeFrom",
    "ImagelintRunRoleCreate",
    "ImagelintRunProfileCreate",
    "ImagelintRunProfileTags",
}


def _candidate_image(env: MotoEnv) -> str:
    """An AMI of this account (CreateImage), it and its snapshots tagged as the pipeline's candidate."""
    ec2 = env.client("ec2", direct=True)
    iid = ec2.run_instances(ImageId=env.image_id, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    ami = ec2.create_image(InstanceId=iid, Name="candidate")["ImageId"]
    ec2.terminate_instances(InstanceIds=[iid])
    snapshots = ec2_ops.mapped_snapshots(ec2.describe_images(ImageIds=[ami])["Images"][0])
    ec2.create_tags(Resources=[ami, *snapshots], Tags=[{"Key": CANDIDATE_TAG[0], "Value": CANDIDATE_TAG[1]}])
    return str(ami)


def _make_candidate(env: MotoEnv, ami: str) -> None:
    ec2 = env.client("ec2", direct=True)
    snapshots = ec2_ops.mapped_snapshots(ec2.describe_images(ImageIds=[ami])["Images"][0])
    ec2.create_tags(Resources=[ami, *snapshots], Tags=[{"Key": CANDIDATE_TAG[0], "Value": CANDIDATE_TAG[1]}])


def _runner_policy(bucket: str, boundary: str | None = None) -> dict:
    values = dataclasses.replace(FILLED, report_bucket=bucket, permissions_boundary=boundary)
    return documents(values=values)["runner"]


def _check_scoped_requests(recorded: Recorder) -> None:
    """(a) every request of the calls the policy scopes by resource is allowed by a statement (the
    resource's owner and tags as they were at the call), and (b) each scoping statement allows one."""
    bucket = next(r.resource for r in recorded.scoped if r.action == "s3:ListBucket").split(":::")[1]
    runner = _runner_policy(bucket)
    used: set[str] = set()
    for request in recorded.scoped:
        # a run given --permissions-boundary: the policy printed with that boundary
        boundary = request.context.get("iam:PermissionsBoundary")
        custom = boundary and boundary != policy.SSM_MANAGED_POLICY
        sids = iam_eval.allowed_by(_runner_policy(bucket, boundary) if custom else runner, request)
        assert sids, f"refused by the runner policy: {request}"
        used |= set(sids)
    assert {r.action for r in recorded.scoped} >= {
        "ssm:SendCommand",
        "s3:PutObject",
        "s3:GetObject",
        "s3:ListBucket",
        "ec2:CreateTags",
        "ec2:DeregisterImage",
        "ec2:DeleteSnapshot",
        "ec2:CreateVolume",
        "iam:CreateRole",
        "iam:TagRole",
        "iam:CreateInstanceProfile",
    }
    assert used >= SCOPED, SCOPED - used


def _check_tag_conditions(recorded: Recorder, moto_env: MotoEnv) -> None:
    """The flows' requests meet the runner policy's tag conditions: what they create carries the run
    tag in the creating call (aws:RequestTag), tags after creation go only on the gated AMI and its
    snapshots, and what they terminate carries the run tag (aws:ResourceTag)."""
    from imagelint.aws.ec2 import RUN_TAG

    def tagged(params: dict, kind: str) -> bool:
        specs = [t for t in params.get("TagSpecifications", []) if t["ResourceType"] == kind]
        return any(tag["Key"] == RUN_TAG for spec in specs for tag in spec["Tags"])

    launched = [p for p in recorded.made("ec2:RunInstances") if "UserData" in p]  # the flows', not the test's
    assert launched and all(tagged(p, "instance") and tagged(p, "volume") for p in launched)
    created = recorded.made("ec2:CreateVolume")
    assert created and all(tagged(p, "volume") for p in created)
    verdicts = [
        p for p in recorded.made("ec2:CreateTags") if any(t["Key"] == "imagelint:verdict" for t in p["Tags"])
    ]
    assert verdicts and all(r.startswith(("ami-", "snap-")) for p in verdicts for r in p["Resources"])
    terminated = {i for p in recorded.made("ec2:TerminateInstances") for i in p["InstanceIds"]}
    reply = moto_env.client("ec2").describe_instances(InstanceIds=sorted(terminated))
    tags = {
        i["InstanceId"]: {t["Key"] for t in i.get("Tags", [])}
        for r in reply["Reservations"]
        for i in r["Instances"]
    }
    assert terminated and all(RUN_TAG in tags[i] for i in terminated), tags


@pytest.mark.slow
def test_snapshot_mode_with_tag_calls_only_what_its_policy_allows(
    recorded: Recorder, moto_env: MotoEnv, faulty_disk: Path
) -> None:
    """The Packer recipes' offline gate (`ami --mode snapshot --tag`), run for real: every call is in
    snapshot mode's policy, CreateTags included."""
    from imagelint.aws.snapshot import IAM_POLICY
    from imagelint.commands.ami import AmiOptions, run_ami
    from tests.aws.ebs_upload import register_image, upload_image

    snapshot_id, _ = upload_image(moto_env.client("ebs", direct=True), faulty_disk)
    image = register_image(moto_env.client("ec2", direct=True), snapshot_id)
    recorded.calls.clear()
    assert run_ami(AmiOptions(images=[image], mode="snapshot", tag=True)).value == "fail"
    assert {"ec2:CreateTags", "ebs:GetSnapshotBlock", "ec2:DescribeSnapshots"} <= recorded.calls
    allowed = _actions(IAM_POLICY, direct=True)
    assert not {c for c in recorded.calls - policy.NO_PERMISSION if not _allowed(c, allowed)}


_ACTION = re.compile(r"^[a-z0-9-]+:[A-Za-z0-9*?]+$")
_CONDITION_KEY = re.compile(r"^(aws|ec2|iam|kms|s3|ssm):[A-Za-z]+(-[a-z]+)*(/[\w:.+=@/-]+)?$")
_OPERATORS = {
    "StringEquals",
    "StringLike",
    "StringNotEquals",
    "Bool",
    "ArnLike",
    "ArnEquals",
    "ForAllValues:StringEquals",
}
_PLACEHOLDER = re.compile(r"[A-Z]+(-[A-Z]+)+")  # RUN-ROLE-ARN: a whole Resource the user fills in
_SERVICES = {"ec2": "ec2", "ebs": "ebs", "kms": "kms", "ssm": "ssm", "s3": "s3", "iam": "iam", "sts": "sts"}


def _policies() -> list[dict]:
    from imagelint.aws.snapshot import IAM_POLICY

    return [policy.runner_policy(), IAM_POLICY]


@pytest.mark.parametrize("index", range(2), ids=["runner", "snapshot-mode"])
def test_the_policies_are_well_formed_and_name_real_actions(index: int) -> None:
    """Valid IAM JSON; every action an operation of botocore's model of its service (or a documented
    permission-only action), wildcards matching at least one; well-formed condition keys."""
    import botocore.session

    doc = _policies()[index]
    assert set(doc) == {"Version", "Statement"} and doc["Version"] == "2012-10-17"
    session = botocore.session.get_session()
    sids = [s["Sid"] for s in doc["Statement"] if "Sid" in s]
    assert len(sids) == len(set(sids)) and all(re.fullmatch(r"[A-Za-z0-9]+", sid) for sid in sids)
    for statement in doc["Statement"]:
        assert set(statement) <= {"Sid", "Effect", "Action", "Resource", "Condition"}
        assert statement["Effect"] == "Allow"
        resources = statement["Resource"]
        for resource in [resources] if isinstance(resources, str) else resources:
            assert (
                resource == "*"
                or _PLACEHOLDER.fullmatch(resource)
                or re.fullmatch(r"arn:aws:[a-z0-9-]+:[a-z0-9*-]*:[0-9*]*:\S+", resource)
            ), resource
        for action in statement["Action"]:
            assert _ACTION.match(action), action
            prefix, name = action.split(":")
            if action in policy.PERMISSION_ONLY:
                continue
            operations = session.get_service_model(_SERVICES[prefix]).operation_names
            assert fnmatch.filter(operations, name), (
                f"{action}: no such operation in botocore's {prefix} model"
            )
        for operator, test in statement.get("Condition", {}).items():
            assert operator in _OPERATORS, operator
            assert all(_CONDITION_KEY.match(key) for key in test), test


def test_role_arn_needs_only_sts_assume_role(recorded: Recorder, moto_env: MotoEnv):
    from imagelint.aws.credentials import role_session

    session = role_session("arn:aws:iam::123456789012:role/imagelint", 3600, "us-east-1", label="run-1")
    assert session.get_credentials().get_frozen_credentials().token
    assert "sts:AssumeRole" in recorded.calls
    # the run id names the session and is its SourceIdentity (CloudTrail keeps it on every call)
    (assumed,) = recorded.made("sts:AssumeRole")
    assert assumed["RoleSessionName"] == assumed["SourceIdentity"] == "imagelint-run-1"
    assert re.fullmatch(r"sts:AssumeRole", next(c for c in recorded.calls if c.startswith("sts:")))


def test_a_pinned_document_is_sent_and_the_policy_follows_it(
    recorded: Recorder, moto_env: MotoEnv, sample_image: Path, tmp_path: Path
) -> None:
    """--document NAME:VERSION (an organization's pinned copy of AWS-RunShellScript) is the document
    SendCommand names, with its version; the policy printed with --document allows it and the
    default one does not."""
    from imagelint.aws.ec2 import LaunchSettings
    from imagelint.commands.ami import AmiOptions, Timing, run_ami
    from imagelint.formats.outputs import OutputSpec
    from imagelint.session import RunOptions

    moto_env.agent.rootfs = sample_image
    moto_env.agent.shell_documents.add("Org-RunShellScript")
    options = AmiOptions(
        images=[moto_env.image_id],
        report_bucket=moto_env.bucket,
        launch=LaunchSettings(instance_type="t3.micro", instance_profile=moto_env.profile),
        timing=Timing(poll=0.2, ssm_timeout=30),
        run=RunOptions(outputs=[OutputSpec("json", tmp_path / "r.json")]),
        document=("Org-RunShellScript", "3"),
    )
    assert run_ami(options).value in ("pass", "fail")
    (sent,) = recorded.made("ssm:SendCommand")
    assert (sent["DocumentName"], sent["DocumentVersion"]) == ("Org-RunShellScript", "3")
    (request,) = [r for r in recorded.scoped if r.action == "ssm:SendCommand" and ":document/" in r.resource]
    followed = documents(values=dataclasses.replace(FILLED, document="Org-RunShellScript:3"))["runner"]
    assert iam_eval.allowed_by(followed, request) == ["ImagelintSendDocument"]
    assert not iam_eval.allowed_by(documents(values=FILLED)["runner"], request)


@pytest.mark.parametrize("given", ["ab", "My Doc", "Org-Run:v3", "Org-Run:0"])
def test_a_malformed_document_is_one_line_exit_2(given: str) -> None:
    proc = run_cli("ami", "ami-0123456789abcdef0", "--report-bucket", "b", "--document", given)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--document" in proc.stderr, proc.stderr
    policies = run_cli("ami", "policies", "runner", "--document", given)
    assert policies.returncode == 2 and "--document" in policies.stderr
