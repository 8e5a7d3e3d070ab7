"""A run's cleanup, step by step (imagelint/aws/teardown.py, imagelint/commands/ami.py, imagelint/aws/
cleanup.py), against moto through the front: each step that fails (refused, or throttled past the
SDK's retries) leaves the next steps running, the audit keeps its verdict in the report, the failure
is its own entry there and its own line on stderr, and a pass then ends with exit 3. Afterwards
nothing is alive that could have been removed."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from imagelint.report import Verdict
from tests.aws.moto_env import MotoEnv
from tests.aws.test_run_profile import _run_roles
from tests.support import os_root, run_cli

pytestmark = pytest.mark.lane  # waits on the run's polls and timers more than it computes (tests/conftest.py)

DENIED = ("UnauthorizedOperation", "You are not authorized to perform this operation.")
NOTHING = {"instances": [], "volumes": [], "groups": []}


@pytest.fixture
def moto_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoEnv]:
    with MotoEnv(managed_policies=True) as env:  # --create-profile attaches AmazonSSMManagedInstanceCore
        for key, value in env.env.items():
            monkeypatch.setenv(key, value)
        yield env


@pytest.fixture(scope="module")
def passing_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tree IL101 (the only rule selected) has nothing to say about: the audit passes."""
    return os_root(tmp_path_factory.mktemp("passing") / "rootfs")


def _ami(env: MotoEnv, tmp_path: Path) -> tuple[Verdict, dict[str, Any]]:
    """`imagelint ami` with --create-profile, in this process (short waits); its exit verdict and report."""
    from imagelint.commands.ami import AmiOptions, Timing, run_ami
    from imagelint.formats.outputs import OutputSpec
    from imagelint.session import RunOptions

    out = tmp_path / "r.json"
    options = AmiOptions(
        images=[env.image_id],
        report_bucket=env.bucket,
        create_profile=True,
        timing=Timing(poll=0.2, group_wait=1.0),
        run=RunOptions(outputs=[OutputSpec("json", out)], select=["IL101"]),
    )
    verdict = run_ami(options)
    return verdict, json.loads(out.read_text(encoding="utf-8"))


def _after_terminate(env: MotoEnv, fault: Callable[[], None]) -> None:
    """Inject ``fault`` once the run has asked to terminate its instance (its cleanup has begun)."""
    env.on_call["TerminateInstances"] = lambda form: fault()


def _refuse(env: MotoEnv, action: str) -> Callable[[], None]:
    return lambda: env.refuse.__setitem__(action, DENIED)


def _refuse_now(action: str) -> Callable[[MotoEnv], None]:
    return lambda env: env.refuse.__setitem__(action, DENIED)


STEPS = {
    # step: (what to inject, the words of the failed step, what is left because it failed)
    "terminate": (_refuse_now("TerminateInstances"), "terminate i-", "instance"),
    "wait": (
        lambda env: _after_terminate(env, _refuse(env, "DescribeInstances")),
        "wait for the termination",
        "",
    ),
    "security group": (_refuse_now("DeleteSecurityGroup"), "security group", "group"),
    "role and profile": (_refuse_now("DeleteInstanceProfile"), "remove role and instance profile", "profile"),
}


@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_failed_cleanup_step_leaves_the_others_running_and_the_verdict_standing(
    moto_env: MotoEnv, sample_image: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], step: str
) -> None:
    inject, words, left = STEPS[step]
    moto_env.agent.rootfs = sample_image  # IL101 fires on it: the audit fails
    inject(moto_env)
    verdict, report = _ami(moto_env, tmp_path)
    err = capsys.readouterr().err
    assert verdict is Verdict.FAIL and report["verdict"] == "fail"  # the audit's verdict, not exit 3
    (failed,) = report["facts"]["cleanup"]["failed"]
    assert words in failed
    (warning,) = [w for w in report["warnings"] if w["where"] == "cleanup"]
    assert "cleanup failed, resources of the run may be left" in warning["message"]
    (line,) = [x for x in err.splitlines() if "error: cleanup failed" in x]  # its own line
    assert "resources of the run may be left" in line and "imagelint ami cleanup" in line

    # every other step ran: nothing is alive that could have been removed
    moto_env.refuse.clear()
    alive = moto_env.alive()
    (instance,) = moto_env.launched()
    expected = {
        "instances": [instance] if left == "instance" else [],
        # the root volume of an instance still running is in use: it goes with the instance
        "volumes": alive["volumes"] if left == "instance" else [],
        # a group an instance still uses cannot be deleted (DependencyViolation): kept, with a warning
        "groups": alive["groups"] if left in ("instance", "group") else [],
    }
    assert alive == expected
    assert len(alive["groups"]) == (1 if left in ("instance", "group") else 0)
    volumes = (
        moto_env.client("ec2").describe_volumes(VolumeIds=alive["volumes"])["Volumes"]
        if alive["volumes"]
        else []
    )
    assert all(v["State"] == "in-use" and v["Attachments"][0]["InstanceId"] == instance for v in volumes)
    run_id = report["target"]["run_id"]
    assert _run_roles(moto_env) == ([f"imagelint-{run_id}"] if left == "profile" else [])


def test_a_failed_cleanup_step_turns_a_pass_into_exit_3_and_the_report_still_says_pass(
    moto_env: MotoEnv, passing_tree: Path, tmp_path: Path
) -> None:
    moto_env.agent.rootfs = passing_tree
    moto_env.refuse["DeleteSecurityGroup"] = DENIED
    verdict, report = _ami(moto_env, tmp_path)
    assert report["verdict"] == "pass" and verdict is Verdict.INCONCLUSIVE  # exit 3: a group is left
    assert "DeleteSecurityGroup" in report["facts"]["cleanup"]["failed"][0]
    assert moto_env.alive()["instances"] == [] and _run_roles(moto_env) == []


def test_throttling_in_the_cleanup_is_ridden_out(
    moto_env: MotoEnv, sample_image: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37's case: DescribeInstances throttled after TerminateInstances, past botocore's own
    attempts; IAM throttled too. The steps are run again with backoff: nothing left, no failure.
    botocore makes two attempts here, without its adaptive rate (the run's clients make ten, adaptive:
    tests/aws/test_client_retries.py), so every throttle past the second reaches the run's own loops,
    and without them a step would fail; the run takes seconds, not botocore's minute of backoff."""
    from imagelint.aws import clients

    monkeypatch.setattr(clients, "RETRIES", {"max_attempts": 2, "mode": "standard"})
    moto_env.agent.rootfs = sample_image

    def throttle() -> None:
        moto_env.throttle_calls.update({"DescribeInstances": 6, "DeleteSecurityGroup": 5, "DeleteRole": 5})

    _after_terminate(moto_env, throttle)
    verdict, report = _ami(moto_env, tmp_path)
    assert verdict is Verdict.FAIL and report["verdict"] == "fail"
    assert "cleanup" not in report["facts"] and all(w["where"] != "cleanup" for w in report["warnings"])
    assert sorted(set(moto_env.answered_throttled)) == [
        "DeleteRole",
        "DeleteSecurityGroup",
        "DescribeInstances",
    ]
    assert moto_env.throttle_calls == {"DescribeInstances": 0, "DeleteSecurityGroup": 0, "DeleteRole": 0}
    assert moto_env.alive() == NOTHING and _run_roles(moto_env) == []


def test_the_sweeper_runs_every_removal_and_exits_3_when_one_failed(moto_env: MotoEnv) -> None:
    from imagelint.aws.run_profile import create_run_profile

    tags = [{"ResourceType": "instance", "Tags": [{"Key": "imagelint:run", "Value": "old-run"}]}]
    tags[0]["Tags"].append({"Key": "imagelint:deadline", "Value": "2099-01-01T00:00:00Z"})
    ec2 = moto_env.client("ec2")
    (instance,) = [
        i["InstanceId"]
        for i in ec2.run_instances(ImageId=moto_env.image_id, MinCount=1, MaxCount=1, TagSpecifications=tags)[
            "Instances"
        ]
    ]
    name = create_run_profile(moto_env.client("iam"), "old-run")
    moto_env.refuse["TerminateInstances"] = DENIED
    proc = run_cli("ami", "cleanup", "--run", "old-run", "--poll", "0.2s", env=moto_env.env, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert f"terminate {instance}" in proc.stderr and "UnauthorizedOperation" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("imagelint: error: cleanup failed")
    assert f"deleted role {name}" in proc.stdout  # the step after the failed one still ran
    assert _run_roles(moto_env) == [] and moto_env.alive()["instances"] == [instance]


def test_volume_mode_a_refused_delete_is_reported_and_the_verdict_stands(
    moto_env: MotoEnv, sample_image: Path, tmp_path: Path
) -> None:
    from imagelint.commands.ami import AmiOptions, Timing, run_ami
    from imagelint.formats.outputs import OutputSpec
    from imagelint.session import RunOptions
    from tests.aws.test_ami_other import LocalTreeHost

    ec2 = moto_env.client("ec2")
    runner = ec2.run_instances(ImageId=moto_env.image_id, MinCount=1, MaxCount=1)["Instances"][0]
    host = LocalTreeHost(runner["InstanceId"], runner["Placement"]["AvailabilityZone"], sample_image)
    moto_env.refuse["DeleteVolume"] = DENIED
    out = tmp_path / "r.json"
    options = AmiOptions(
        images=[moto_env.image_id],
        mode="volume",
        timing=Timing(poll=0.2),
        run=RunOptions(outputs=[OutputSpec("json", out)], select=["IL101"]),
    )
    verdict = run_ami(options, volume_host=host)
    report = json.loads(out.read_text(encoding="utf-8"))
    assert verdict is Verdict.FAIL and report["verdict"] == "fail"
    (failed,) = report["facts"]["cleanup"]["failed"]
    assert failed.startswith("delete vol-") and "DeleteVolume" in failed
    (left,) = moto_env.alive()["volumes"]  # the one the refusal kept: detached, nothing else left
    assert ec2.describe_volumes(VolumeIds=[left])["Volumes"][0]["State"] == "available"
