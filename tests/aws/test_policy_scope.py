"""Each scoping statement of the runner's policy refuses a request just outside its scope (the recorded
flows show each allows what the code does: tests/aws/test_policy.py), and `imagelint ami policies`
fills the placeholders from its options."""

from __future__ import annotations

import json

import pytest

from imagelint.aws.policy import CANDIDATE_TAG, VERDICT_TAG_KEYS
from imagelint.aws.policy_fill import Fill, documents
from tests.aws.iam_eval import ACCOUNT, REGION, Request, allowed_by
from tests.support import run_cli

FILL = Fill(
    report_bucket="reports",
    account=ACCOUNT,
    candidate_tag="stage=candidate",
    fleet_tag="Role=web",
    role_arn=f"arn:aws:iam::{ACCOUNT}:role/imagelint",
)
RUNNER = documents(values=FILL)["runner"]
INSTANCE = f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-0123456789abcdef0"
IMAGE = f"arn:aws:ec2:{REGION}::image/ami-0123456789abcdef0"
SNAPSHOT = f"arn:aws:ec2:{REGION}::snapshot/snap-0123456789abcdef0"
CANDIDATE = {"ec2:Owner": ACCOUNT, "aws:ResourceTag/stage": "candidate"}
VERDICT = {**CANDIDATE, "aws:TagKeys": list(VERDICT_TAG_KEYS)}

# Sid → (a request it allows, requests just outside its scope that no statement allows)
CASES = {
    "ImagelintSendDocument": (
        Request("ssm:SendCommand", f"arn:aws:ssm:{REGION}::document/AWS-RunShellScript"),  # AWS-owned
        [
            Request("ssm:SendCommand", f"arn:aws:ssm:{REGION}::document/AWS-RunPowerShellScript"),
            Request("ssm:SendCommand", f"arn:aws:ssm:{REGION}:{ACCOUNT}:document/MyShell"),
        ],
    ),
    "ImagelintSendRunInstance": (
        Request("ssm:SendCommand", INSTANCE, {"ssm:resourceTag/imagelint:run": "r-1"}),
        [
            Request("ssm:SendCommand", INSTANCE, {}),  # an untagged instance
            Request("ssm:SendCommand", INSTANCE, {"ssm:resourceTag/Name": "imagelint:run"}),
        ],
    ),
    "ImagelintSendFleetInstance": (
        Request("ssm:SendCommand", INSTANCE, {"ssm:resourceTag/Role": "web"}),
        [Request("ssm:SendCommand", INSTANCE, {"ssm:resourceTag/Role": "db"})],
    ),
    "ImagelintReportBucket": (
        Request("s3:ListBucket", "arn:aws:s3:::reports"),
        [Request("s3:ListBucket", "arn:aws:s3:::reports-other")],
    ),
    "ImagelintReports": (
        Request("s3:PutObject", "arn:aws:s3:::reports/imagelint/run-1/i-1/bundle.tar.gz"),
        [
            Request("s3:PutObject", "arn:aws:s3:::reports/other/bundle.tar.gz"),  # outside the prefix
            Request("s3:GetObject", "arn:aws:s3:::other/imagelint/run-1/report.json"),  # another bucket
            Request("s3:DeleteObject", "arn:aws:s3:::reports/other/bundle.tar.gz"),  # outside the prefix
        ],
    ),
    "ImagelintReportsOtherAccount": (
        Request(
            "s3:PutObjectAcl",
            "arn:aws:s3:::reports/imagelint/run-1/i-1/bundle.tar.gz",
            {"s3:x-amz-acl": "bucket-owner-full-control"},
        ),
        [
            Request(
                "s3:PutObjectAcl",
                "arn:aws:s3:::reports/imagelint/run-1/i-1/bundle.tar.gz",
                {"s3:x-amz-acl": "public-read"},
            ),
            Request("s3:PutObjectAcl", "arn:aws:s3:::reports/imagelint/run-1/i-1/bundle.tar.gz", {}),
        ],
    ),
    "ImagelintVerdictTags": (
        Request("ec2:CreateTags", IMAGE, VERDICT),
        [
            Request("ec2:CreateTags", IMAGE, {**VERDICT, "aws:TagKeys": ["imagelint:verdict", "Name"]}),
            Request("ec2:CreateTags", SNAPSHOT, {**VERDICT, "ec2:Owner": "444455556666"}),
            Request("ec2:CreateTags", IMAGE, {"ec2:Owner": ACCOUNT, "aws:TagKeys": ["imagelint:verdict"]}),
        ],
    ),
    "ImagelintOnFail": (
        Request("ec2:DeleteSnapshot", SNAPSHOT, CANDIDATE),
        [
            Request(
                "ec2:DeleteSnapshot", SNAPSHOT, {"ec2:Owner": ACCOUNT, "aws:ResourceTag/backup": "daily"}
            ),
            Request("ec2:DeleteSnapshot", SNAPSHOT, {**CANDIDATE, "ec2:Owner": "444455556666"}),
            Request("ec2:DeregisterImage", IMAGE, {"ec2:Owner": ACCOUNT}),
            Request("ec2:EnableImageDeprecation", IMAGE, {**CANDIDATE, "aws:ResourceTag/stage": "released"}),
        ],
    ),
    "ImagelintRole": (
        Request("sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/imagelint"),
        [Request("sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/admin")],
    ),
}


@pytest.mark.parametrize("sid", sorted(CASES))
def test_each_statement_allows_its_scope_and_refuses_just_outside(sid: str) -> None:
    inside, outside = CASES[sid]
    assert sid in allowed_by(RUNNER, inside)
    for request in outside:
        assert not allowed_by(RUNNER, request), request


def test_the_unfilled_policy_allows_no_real_bucket_tag_or_role() -> None:
    """Left as placeholders, the scoped statements match nothing real (a user must fill them)."""
    runner = documents()["runner"]
    for sid, (inside, _) in CASES.items():
        if sid not in ("ImagelintSendDocument", "ImagelintSendRunInstance"):
            assert sid not in allowed_by(runner, inside), sid


def test_ami_policies_fills_the_placeholders_and_refuses_bad_values() -> None:
    args = ["--report-bucket", "reports", "--account", ACCOUNT, "--candidate-tag", "stage=candidate"]
    args += ["--fleet-tag", "Role=web", "--role-arn", f"arn:aws:iam::{ACCOUNT}:role/imagelint"]
    proc = run_cli("ami", "policies", *args)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == documents(values=FILL)
    assert "REPORT-BUCKET" not in proc.stdout and CANDIDATE_TAG[0] not in proc.stdout
    assert "INSTANCE-ROLE" in proc.stdout  # not given: stays a placeholder
    prefixed = json.loads(run_cli("ami", "policies", "runner", "--report-prefix", "ci/imagelint/").stdout)
    reports = next(s for s in prefixed["Statement"] if s["Sid"] == "ImagelintReports")
    assert reports["Resource"] == "arn:aws:s3:::REPORT-BUCKET/ci/imagelint/*"
    snapshot = json.loads(run_cli("ami", "policies", "snapshot-mode", "--candidate-tag", "k=v").stdout)
    assert {"aws:ResourceTag/k": "v"}.items() <= snapshot["Statement"][-1]["Condition"][
        "StringEquals"
    ].items()
    for bad in (
        ["--account", "12345"],
        ["--fleet-tag", "Role"],
        ["--candidate-tag", "k=a,b"],
        ["--report-bucket", "Bad_Bucket"],
        ["--report-prefix", "x/*"],
        ["--role-arn", "arn:aws:iam::123456789012:user/me"],
        ["--region", "cn-north-1", "--role-arn", f"arn:aws:iam::{ACCOUNT}:role/imagelint"],
    ):
        proc = run_cli("ami", "policies", *bad)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, bad


def test_verdict_tag_keys_are_those_tag_writes() -> None:
    from imagelint.commands.ami import verdict_tags
    from imagelint.report.model import Verdict

    assert tuple(verdict_tags(Verdict.FAIL, "0" * 64)) == VERDICT_TAG_KEYS


def test_the_report_kms_key_is_filled_and_scopes_kms_to_that_key_through_s3() -> None:
    key = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    runner = documents(values=Fill(report_bucket="reports", sse_kms_key=key))["runner"]
    assert "REPORT-KMS-KEY" not in json.dumps(runner)
    via_s3 = {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}
    assert allowed_by(runner, Request("kms:GenerateDataKey", key, via_s3)) == ["ImagelintReportsKms"]
    other_key = key.replace("1234abcd", "9999abcd")
    assert allowed_by(runner, Request("kms:GenerateDataKey", other_key, via_s3)) == []
    assert allowed_by(runner, Request("kms:Decrypt", key, {})) == []  # only through S3
    assert "REPORT-KMS-KEY" in json.dumps(RUNNER)  # not given: it stays a placeholder
    proc = run_cli("ami", "policies", "runner", "--sse-kms-key", "alias/reports")
    assert proc.returncode == 2 and "an alias cannot scope an IAM statement" in proc.stderr
