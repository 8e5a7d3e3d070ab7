"""What becomes of a bundle once read (imagelint.aws.ssm.discard_bundle, shared by `ami check` and
`fleet`), and the SSM document `fleet --document` sends, against moto's S3 and the SSM front."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tests.aws import iam_eval
from tests.aws.conftest import Recorder
from tests.aws.moto_env import MotoEnv
from tests.aws.test_ami_launch import ami
from tests.aws.test_ami_other import _fleet_instances
from tests.aws.test_policy import FILLED, documents
from tests.support import run_cli


def _bundles(env: MotoEnv) -> list[str]:
    listed = env.client("s3", direct=True).list_objects_v2(Bucket=env.bucket).get("Contents", [])
    return [o["Key"] for o in listed if o["Key"].endswith("/bundle.tar.gz")]


def _deletes(env: MotoEnv) -> list[tuple[str, str | None]]:
    """The DELETE requests on the bucket, with the owner each expected (the front records them)."""
    return [(path, owner) for method, path, owner in env.s3_requests if method == "DELETE"]


def test_ami_check_deletes_its_bundle_once_read_with_the_expected_owner(
    moto_env: MotoEnv, sample_image: Path
) -> None:
    moto_env.agent.rootfs = sample_image
    moto_env.bucket_owners[moto_env.bucket] = "123456789012"  # moto's account: S3 checks the header
    proc = ami(moto_env, moto_env.image_id, "--report-bucket", moto_env.bucket)
    assert proc.returncode == 1, proc.stderr
    assert _bundles(moto_env) == []
    (deleted,) = _deletes(moto_env)
    assert deleted[0].endswith("/bundle.tar.gz") and deleted[1] == "123456789012"


def test_ami_check_keep_bundles_leaves_it(moto_env: MotoEnv, sample_image: Path) -> None:
    moto_env.agent.rootfs = sample_image
    proc = ami(moto_env, moto_env.image_id, "--report-bucket", moto_env.bucket, "--keep-bundles")
    assert proc.returncode == 1, proc.stderr
    assert len(_bundles(moto_env)) == 1


def test_a_refused_delete_is_a_warning_and_the_report_stands(
    moto_env: MotoEnv, sample_image: Path, tmp_path: Path
) -> None:
    moto_env.agent.rootfs = sample_image
    moto_env.bundle_delete_fault = (403, "AccessDenied")
    out = tmp_path / "report.json"
    proc = ami(moto_env, moto_env.image_id, "--report-bucket", moto_env.bucket, "-f", f"json:{out}")
    assert proc.returncode == 1, proc.stderr  # the verdict's exit code, not 3
    report = json.loads(out.read_text())
    assert report["verdict"] == "fail" and report["findings"]
    (warning,) = [w for w in report["warnings"] if w.get("where") == "bundle"]
    assert warning["message"].startswith(f"could not delete s3://{moto_env.bucket}/")
    assert "AccessDenied" in warning["message"]
    assert len(_bundles(moto_env)) == 1  # left, and said so


def test_fleet_sends_the_named_document_and_version(moto_env: MotoEnv, sample_image: Path) -> None:
    moto_env.agent.rootfs = sample_image
    moto_env.agent.shell_documents.add("Org-RunShellScript")
    (instance,) = _fleet_instances(moto_env, "doc", 1)
    proc = run_cli(
        "fleet", "--target", "tag:Role=doc", "--report-bucket", moto_env.bucket, "--poll", "0.2s",
        "--document", "Org-RunShellScript:3", env=moto_env.env,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # the named document ran: the sample image was judged
    sent = [(c["DocumentName"], c.get("DocumentVersion")) for c in moto_env.agent.commands.values()]
    assert sent == [("Org-RunShellScript", "3")]
    assert [ids for ids in moto_env.asked] == [(instance,)]


def test_fleet_document_is_what_the_policy_follows(
    recorded: Recorder, moto_env: MotoEnv, sample_image: Path, tmp_path: Path
) -> None:
    from imagelint.commands.fleet import FleetOptions, run_fleet
    from imagelint.formats.outputs import OutputSpec
    from imagelint.session import RunOptions

    moto_env.agent.rootfs = sample_image
    moto_env.agent.shell_documents.add("Org-RunShellScript")
    _fleet_instances(moto_env, "doc", 1)
    run = RunOptions(outputs=[OutputSpec("json", tmp_path / "r.json")])
    options = FleetOptions(
        target="tag:Role=doc",
        report_bucket=moto_env.bucket,
        poll=0.2,
        run=run,
        document=("Org-RunShellScript", "3"),
    )
    assert run_fleet(options).value == "fail"
    (sent,) = recorded.made("ssm:SendCommand")
    assert (sent["DocumentName"], sent["DocumentVersion"]) == ("Org-RunShellScript", "3")
    (request,) = [r for r in recorded.scoped if r.action == "ssm:SendCommand" and ":document/" in r.resource]
    followed = documents(values=dataclasses.replace(FILLED, document="Org-RunShellScript:3"))["runner"]
    assert iam_eval.allowed_by(followed, request) == ["ImagelintSendDocument"]
    assert not iam_eval.allowed_by(documents(values=FILLED)["runner"], request)


def test_a_malformed_fleet_document_is_one_line_exit_2() -> None:
    proc = run_cli("fleet", "--target", "tag:Role=x", "--report-bucket", "b", "--document", "Org-Run:v3")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "--document 'Org-Run:v3': give NAME[:VERSION]" in proc.stderr  # parse_document's line
