"""--create-profile (imagelint/aws/run_profile.py) against moto through the front: the run's
role and profile exist with their policies when the instance is launched, RunInstances' answer for a
profile EC2 does not know yet is retried (a bounded number of times), and both are removed on every
path; `ami cleanup` removes what a killed run left."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from imagelint.aws import policy
from tests.aws.moto_env import MotoEnv, dry_run
from tests.support import run_cli

FAST = ("--poll", "0.2s", "--soak", "0")


@pytest.fixture
def moto_env() -> Iterator[MotoEnv]:
    with MotoEnv(managed_policies=True) as env:
        yield env


def _ami(env: MotoEnv, *args: str):
    return run_cli(
        "ami", env.image_id, "--report-bucket", env.bucket, "--create-profile", *FAST, *args,
        env=env.env, timeout=120,
    )  # fmt: skip


def _run_roles(env: MotoEnv) -> list[str]:
    iam = env.client("iam", direct=True)
    # moto ignores PathPrefix: the path is checked here
    roles = [r["RoleName"] for r in iam.list_roles()["Roles"] if r["Path"] == "/imagelint/"]
    profiles = [
        p["InstanceProfileName"]
        for p in iam.list_instance_profiles()["InstanceProfiles"]
        if p["Path"] == "/imagelint/"
    ]
    return roles + profiles


def _at_launch(env: MotoEnv) -> list[dict[str, Any]]:
    """The profile each RunInstances names, and its role's policies at that moment."""
    seen: list[dict[str, Any]] = []

    def record(form: dict[str, list[str]]) -> None:
        if dry_run(form):  # the pre-flight, before the profile exists
            return
        name = form["IamInstanceProfile.Name"][0]
        iam = env.client("iam", direct=True)
        (role,) = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Roles"]
        attached = iam.list_attached_role_policies(RoleName=role["RoleName"])["AttachedPolicies"]
        inline = iam.list_role_policies(RoleName=role["RoleName"])["PolicyNames"]
        seen.append({"profile": name, "role": role, "attached": attached, "inline": inline})

    env.on_call["RunInstances"] = record
    return seen


def test_the_run_makes_its_profile_waits_for_ec2_to_know_it_and_removes_it(
    moto_env: MotoEnv, sample_image: Path, tmp_path: Path
) -> None:
    moto_env.agent.rootfs = sample_image
    moto_env.profile_lag = 2  # EC2 does not know the new profile for the first two launches
    launches = _at_launch(moto_env)
    out = tmp_path / "r.json"
    proc = _ami(moto_env, "-f", f"json:{out}")
    assert proc.returncode == 1, proc.stderr  # the image's findings: the run went through
    run_id = json.loads(out.read_text())["target"]["run_id"]
    assert len(launches) == 3 and moto_env.profile_lag == 0 and len(moto_env.launched()) == 1
    launch = launches[-1]
    assert launch["profile"] == f"imagelint-{run_id}" and launch["role"]["Path"] == "/imagelint/"
    assert [p["PolicyArn"] for p in launch["attached"]] == [policy.SSM_MANAGED_POLICY]
    assert launch["inline"] == []  # no S3 permission: the instance uploads through its presigned URL
    assert f"deleted instance profile imagelint-{run_id}" in proc.stderr
    assert f"deleted role imagelint-{run_id}" in proc.stderr
    assert _run_roles(moto_env) == []
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}


def test_a_profile_ec2_never_learns_is_exit_3_after_the_bound_and_removed(moto_env: MotoEnv) -> None:
    moto_env.profile_lag = 100
    proc = _ami(moto_env)
    assert proc.returncode == 3, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "RunInstances failed: InvalidParameterValue" in last and "Invalid IAM Instance Profile" in last
    assert moto_env.profile_lag == 100 - 8  # PROFILE_TRIES attempts, then it gave up
    assert moto_env.launched() == [] and _run_roles(moto_env) == []
    assert moto_env.alive()["groups"] == []


def test_a_failed_run_removes_its_profile(moto_env: MotoEnv, sample_image: Path) -> None:
    moto_env.agent.rootfs = sample_image
    moto_env.agent.online = False
    proc = _ami(moto_env, "--ssm-timeout", "2s")
    assert proc.returncode == 3, proc.stderr
    assert len(moto_env.launched()) == 1 and _run_roles(moto_env) == []


def test_both_profile_options_are_refused(moto_env: MotoEnv) -> None:
    proc = _ami(moto_env, "--instance-profile", moto_env.profile)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "imagelint: error: give --instance-profile or --create-profile, not both"
    )


def test_cleanup_removes_what_a_killed_run_left(moto_env: MotoEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    from imagelint.aws.cleanup import run_cleanup
    from imagelint.aws.run_profile import create_run_profile

    for key, value in moto_env.env.items():
        monkeypatch.setenv(key, value)
    name = create_run_profile(moto_env.client("iam"), "killed-run")
    assert sorted(_run_roles(moto_env)) == [name, name]
    assert run_cleanup(None, 0, dry_run=True, poll=0.2) == []  # before its deadline: maybe in progress
    assert run_cleanup(None, 0, dry_run=True, poll=0.2, run="killed-run") == [
        f"would delete role and instance profile {name}"
    ]
    assert run_cleanup(None, 0, dry_run=False, poll=0.2, run="killed-run") == [
        f"deleted instance profile {name}",
        f"deleted role {name}",
    ]
    assert _run_roles(moto_env) == []
    assert moto_env.client("iam").get_instance_profile(InstanceProfileName=moto_env.profile)  # not a run's


def test_the_run_role_is_bounded_and_tagged_by_default(moto_env: MotoEnv) -> None:
    """Without --permissions-boundary the role's boundary is AmazonSSMManagedInstanceCore; the role
    and profile carry the run tag and a deadline without --resource-tag."""
    from imagelint.aws.run_profile import create_run_profile

    iam = moto_env.client("iam")
    name = create_run_profile(iam, "r-1")
    role = iam.get_role(RoleName=name)["Role"]
    assert role["PermissionsBoundary"]["PermissionsBoundaryArn"] == policy.SSM_MANAGED_POLICY
    for tags in (role["Tags"], iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Tags"]):
        found = {t["Key"]: t["Value"] for t in tags}
        assert found["imagelint:run"] == "r-1" and found["imagelint:deadline"].endswith("Z")


def test_cleanup_leaves_a_users_look_alike_role_and_profile(moto_env: MotoEnv) -> None:
    """A user's own /imagelint/imagelint-ssm-prod role and profile (untagged, or carrying a run tag
    that is not its name's) survive `ami cleanup`, whose exit is 0; a run's past its deadline goes."""
    iam = moto_env.client("iam", direct=True)
    trust = json.dumps(policy.INSTANCE_TRUST)
    past = [{"Key": "imagelint:deadline", "Value": "2000-01-01T00:00:00Z"}]
    cases = {
        "imagelint-ssm-prod": [],
        "imagelint-ssm-copy": [{"Key": "imagelint:run", "Value": "other"}, *past],  # name ≠ run
        "imagelint-dead": [{"Key": "imagelint:run", "Value": "dead"}, *past],  # a run's, past its deadline
    }
    for name, tags in cases.items():
        extra = {"Tags": tags} if tags else {}
        iam.create_role(RoleName=name, Path="/imagelint/", AssumeRolePolicyDocument=trust, **extra)
        iam.create_instance_profile(InstanceProfileName=name, Path="/imagelint/", **extra)
        iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
    proc = run_cli("ami", "cleanup", "--older-than", "0s", "--poll", "0.2s", env=moto_env.env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(_run_roles(moto_env)) == sorted(["imagelint-ssm-copy", "imagelint-ssm-prod"] * 2)
    assert proc.stdout.splitlines() == [
        "deleted instance profile imagelint-dead",
        "deleted role imagelint-dead",
    ]
    survivors = ["imagelint-ssm-copy", "imagelint-ssm-prod"]
    assert sorted(_run_roles(moto_env)) == sorted(survivors * 2)


def test_a_chosen_namespace_is_where_roles_are_made_and_cleaned(moto_env: MotoEnv) -> None:
    """--profile-namespace /ci/images/img-: the role and profile are made there; `ami cleanup` with the
    same namespace removes them (here with --run), without it leaves them."""
    from imagelint.aws.policy import Namespace
    from imagelint.aws.run_profile import create_run_profile

    iam = moto_env.client("iam", direct=True)
    name = create_run_profile(iam, "r-9", namespace=Namespace.parse("/ci/images/img-"))
    assert name == "img-r-9" and iam.get_role(RoleName=name)["Role"]["Path"] == "/ci/images/"
    base = ("ami", "cleanup", "--run", "r-9", "--poll", "0.2s")
    elsewhere = run_cli(*base, env=moto_env.env, timeout=120)
    assert elsewhere.returncode == 0 and elsewhere.stdout == "", elsewhere.stderr
    there = run_cli(*base, "--profile-namespace", "/ci/images/img-", env=moto_env.env, timeout=120)
    assert there.returncode == 0, there.stderr
    assert there.stdout.splitlines() == [f"deleted instance profile {name}", f"deleted role {name}"]
    bad = run_cli("ami", "cleanup", "--profile-namespace", "img-", env=moto_env.env)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--profile-namespace" in bad.stderr
