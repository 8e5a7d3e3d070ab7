"""`imagelint fleet` when AWS answers one host's calls with what moto never does (issue 48, items 3, 4
and 8), injected by the front in front of moto (:mod:`tests.aws.moto_env`): a 500, ``SlowDown``,
``ExpiredToken`` or a KMS error on one host's bundle download, ``ListCommands`` refused on every
poll, a ``SendCommand`` whose reply is lost, one host throttled at every send. Each is that host's
row (or no row's trouble at all); the other hosts are judged, the report is written, and the exit
code is the worst verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from imagelint.report.schema import report_schema
from tests.aws.fleet_scale import launch, scratch_in_memory
from tests.aws.moto_env import MotoEnv
from tests.support import run_cli

# botocore's retries of a call in the runs of _fleet_here: its ``max_attempts`` counts the retries,
# each call is at most RETRIED + 1 requests (the CLI's clients: ten, tests/aws/test_client_retries.py)
RETRIED = 3


def _fleet_here(env: MotoEnv, out: Path, monkeypatch: pytest.MonkeyPatch, **options: Any) -> int:
    """`imagelint fleet --target tag:Role=faults --poll 0.2s --max-concurrency 10`, in this process
    and with the waits of a throttled call short: botocore retries a call RETRIED times (standard
    mode) and a throttled SendCommand is first retried after at most 0.05 s (the CLI's 1 s, doubling
    in both), so the run takes seconds where the same throttling costs the CLI a minute of backoff;
    the bundles are extracted and removed on tmpfs (:func:`tests.aws.fleet_scale.scratch_in_memory`).
    Its exit code."""
    from imagelint.aws import clients
    from imagelint.commands.fleet import FleetOptions, run_fleet
    from imagelint.formats.outputs import OutputSpec
    from imagelint.session import RunOptions

    for key, value in env.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(clients, "RETRIES", {"max_attempts": RETRIED, "mode": "standard"})
    fleet = FleetOptions(
        target="tag:Role=faults", report_bucket=env.bucket, poll=0.2, max_concurrency="10",
        send_backoff=0.05, run=RunOptions(outputs=[OutputSpec("json", out)]), **options,
    )  # fmt: skip
    with scratch_in_memory():
        return int(run_fleet(fleet).exit_code)


def _rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["instance_id"]: r for r in report["facts"]["instances"]}


def _canned(env: MotoEnv, tree: Path, tmp_path: Path) -> None:
    from tests.collector.support import collect

    env.agent.canned = collect(tree, tmp_path / "collect").read_bytes()


def _bundles_left(env: MotoEnv) -> list[str]:
    listed = env.client("s3", direct=True).list_objects_v2(Bucket=env.bucket).get("Contents", [])
    return sorted(o["Key"] for o in listed if o["Key"].endswith("/bundle.tar.gz"))


@pytest.mark.slow
def test_a_refused_download_of_one_host_is_its_row_and_the_others_are_judged(
    moto_env: MotoEnv, sample_image: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48, item 3: S3 refuses one host's GetObject (a 500 and SlowDown past botocore's
    attempts, ExpiredToken, KMS.DisabledException, a 403 from KMS), and ListCommands answers
    AccessDeniedException at every poll: each refused host is a no-report row naming the error, the
    one good host is judged (the sample image fails), the report is written, exit 1."""
    tagged = launch(moto_env, "faults", 6)
    good, *faulty = tagged
    _canned(moto_env, sample_image, tmp_path)
    faults = [(500, "InternalError"), (503, "SlowDown"), (400, "ExpiredToken")]
    faults += [(400, "KMS.DisabledException"), (403, "AccessDenied")]
    moto_env.s3_faults.update(zip(faulty, faults, strict=True))
    moto_env.ssm_refuse["ListCommands"] = ["AccessDeniedException", -1]
    out = tmp_path / "fleet.json"
    assert _fleet_here(moto_env, out, monkeypatch) == 1  # the good host fails: a fail is never hidden
    report = json.loads(out.read_text())
    jsonschema.validate(report, report_schema())
    rows = _rows(report)
    assert sorted(rows) == tagged
    assert rows[good]["coverage"] == "checked" and rows[good]["verdict"] == "fail"
    for iid, (_, code) in zip(faulty, faults, strict=True):
        assert rows[iid]["coverage"] == "no-report", rows[iid]
        assert f"GetObject failed: {code}" in rows[iid]["reason"]
    assert "kms:Decrypt" in rows[faulty[4]]["reason"]  # a 403 from KMS is not "did not upload"
    assert {e["where"] for e in report["errors"]} == set(faulty)
    assert report["facts"]["command"]["list_errors"] > 0  # ListCommands really failed, polls went on
    # each faulty bundle was asked for; the 500 and SlowDown by every request botocore made
    asked = [sum(f"/{iid}/bundle.tar.gz" in p for p in moto_env.s3_gets) for iid in faulty]
    assert asked[:2] == [RETRIED + 1] * 2 and all(asked), asked
    # the good host's bundle is deleted once read; the ones never read are still there
    assert _bundles_left(moto_env) == sorted(
        f"imagelint/{report['target']['run_id']}/{iid}/bundle.tar.gz" for iid in faulty
    )


@pytest.mark.slow
def test_a_lost_sendcommand_reply_is_found_by_its_marker_and_a_throttled_host_holds_no_one_up(
    moto_env: MotoEnv, clean_rootfs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48, item 8: SSM takes one host's command but its reply is lost (the connection drops):
    the command is found by the send's unique Comment, not sent again, and the host is judged. One
    host throttled at every send waits out its retries while the others are sent theirs."""
    tagged = launch(moto_env, "faults", 5)
    throttled, lost, *rest = tagged  # the first host in the sending order is the throttled one
    _canned(moto_env, clean_rootfs, tmp_path)
    moto_env.lost_send_replies.add(lost)
    moto_env.send_faults[throttled] = "ThrottlingException"
    out = tmp_path / "fleet.json"
    code = _fleet_here(moto_env, out, monkeypatch, keep_bundles=True)
    assert code == 3  # the throttled host is an error, no host fails
    report = json.loads(out.read_text())
    jsonschema.validate(report, report_schema())
    rows = _rows(report)
    assert rows[lost]["coverage"] == "checked" and rows[lost]["verdict"] == "pass"
    assert all(rows[i]["verdict"] == "pass" for i in rest)
    assert rows[throttled]["coverage"] == "not-sent"
    assert "after 8 throttled attempt(s): ThrottlingException" in rows[throttled]["reason"]
    assert report["facts"]["command"]["reconciled"] == 1
    # SSM was asked once for the lost host: the reply was lost, the command was not
    assert [ids for ids in moto_env.asked if lost in ids] == [(lost,)]
    assert sum(lost in c["InstanceIds"] for c in moto_env.agent.commands.values()) == 1
    # the others were sent theirs while the throttled host waited between its attempts
    attempts = [n for n, ids in enumerate(moto_env.asked) if ids == (throttled,)]
    assert len(attempts) == 8
    between = moto_env.asked[attempts[0] : attempts[-1]]
    assert set(rest) & {i for ids in between for i in ids}, moto_env.asked
    # --keep-bundles: every bundle read stays in the bucket
    assert len(_bundles_left(moto_env)) == len(tagged) - 1


CENTRAL = "111111111111"  # the account of the central report bucket (moto's account is 123456789012)


def _central_bucket(env: MotoEnv, name: str) -> None:
    """A bucket that account CENTRAL creates (moto serves it to the other account too)."""
    import boto3

    role = f"arn:aws:iam::{CENTRAL}:role/reports"
    creds = env.client("sts").assume_role(RoleArn=role, RoleSessionName="central")["Credentials"]
    boto3.client(
        "s3",
        region_name="us-east-1",
        endpoint_url=f"http://127.0.0.1:{env.moto_port}",
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
    ).create_bucket(Bucket=name)


@pytest.mark.slow
def test_a_central_bucket_of_another_account_that_demands_sse_kms(
    moto_env: MotoEnv, clean_rootfs: Path, tmp_path: Path
) -> None:
    """Issue 48, item 4, against the front's model of what S3 and a central bucket's policy refuse
    (moto checks neither): ExpectedBucketOwner on every S3 request, uploads refused without SSE-KMS
    and without bucket-owner-full-control. Without --sse-kms-key the pre-flight says so (exit 2, before
    any command); with --bucket-owner and --sse-kms-key every host is judged, its bundle encrypted
    under the key and deleted once read; with the wrong --bucket-owner S3 refuses the first request."""
    bucket = "central-reports"
    _central_bucket(moto_env, bucket)
    key = moto_env.client("kms").create_key()["KeyMetadata"]["Arn"]
    moto_env.bucket_owners[bucket] = CENTRAL
    moto_env.sse_kms_required.add(bucket)
    moto_env.full_control_required.add(bucket)
    tagged = launch(moto_env, "faults", 2)
    _canned(moto_env, clean_rootfs, tmp_path)
    args = ["fleet", "--target", "tag:Role=faults", "--report-bucket", bucket, "--poll", "0.2s"]
    out = tmp_path / "fleet.json"

    plain = run_cli(*args, "--bucket-owner", CENTRAL, env=moto_env.env, timeout=300)
    assert plain.returncode == 2, plain.stderr
    assert "AccessDenied" in plain.stderr and "--sse-kms-key" in plain.stderr
    assert moto_env.sent == []

    wrong = run_cli(*args, "--bucket-owner", "222222222222", "--sse-kms-key", key, env=moto_env.env)
    assert wrong.returncode != 0 and moto_env.sent == [], wrong.stderr

    moto_env.s3_requests.clear()
    proc = run_cli(
        *args, "--bucket-owner", CENTRAL, "--sse-kms-key", key, "-f", f"json:{out}",
        env=moto_env.env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    rows = _rows(report)
    assert sorted(rows) == tagged and all(r["verdict"] == "pass" for r in rows.values())
    # every S3 request on the bucket said whose it must be: the runner's and the hosts' uploads
    assert moto_env.s3_requests and {owner for _, _, owner in moto_env.s3_requests} == {CENTRAL}
    methods = {(m, p.rsplit("/", 1)[-1]) for m, p, _ in moto_env.s3_requests}
    assert {("HEAD", bucket), ("PUT", "bundle.tar.gz"), ("GET", "bundle.tar.gz")} <= methods
    assert ("DELETE", "bundle.tar.gz") in methods
    # the bundles were stored encrypted under the key, then deleted once read
    s3 = moto_env.client("s3", direct=True)
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert not [k for k in listed if k.endswith("/bundle.tar.gz")] and listed  # run.json stays
    marker = s3.head_object(Bucket=bucket, Key=listed[-1])
    assert marker["ServerSideEncryption"] == "aws:kms" and marker["SSEKMSKeyId"] == key
