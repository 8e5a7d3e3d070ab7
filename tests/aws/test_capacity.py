"""A launch that EC2 has no room for moves to the next subnet and instance type (imagelint.aws.capacity),
against moto with InsufficientInstanceCapacity injected by the front, which moto never answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imagelint.aws import capacity
from imagelint.aws.ec2 import LaunchSettings
from imagelint.aws.errors import AwsError
from imagelint.errors import UsageError
from tests.aws.moto_env import MotoEnv, dry_run
from tests.aws.test_ami_launch import ami

TYPE, OTHER = "t3.micro", "t3.small"


def _subnets(env: MotoEnv, count: int) -> list[str]:
    """``count`` default subnets, each in a zone of its own that offers both types."""
    ec2 = env.client("ec2")
    offered = [
        {o["Location"] for o in ec2.describe_instance_type_offerings(
            LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": [kind]}]
        )["InstanceTypeOfferings"]}
        for kind in (TYPE, OTHER)
    ]  # fmt: skip
    subnets = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"]
    usable = sorted(
        (s["AvailabilityZone"], s["SubnetId"])
        for s in subnets
        if all(s["AvailabilityZone"] in o for o in offered)
    )
    assert len(usable) >= count, usable
    return [subnet for _zone, subnet in usable[:count]]


def _launches(env: MotoEnv) -> list[tuple[str, str]]:
    """Every RunInstances (not its DryRun) the run makes, as (subnet, type), recorded from now on."""
    seen: list[tuple[str, str]] = []

    def record(form: dict[str, list[str]]) -> None:
        if not dry_run(form):
            subnet = (form.get("SubnetId") or form.get("NetworkInterface.1.SubnetId") or [""])[0]
            seen.append((subnet, form["InstanceType"][0]))

    env.on_call["RunInstances"] = record
    return seen


def test_no_capacity_in_the_first_zone_launches_in_the_second_and_reports_both(
    moto_env: MotoEnv, sample_image: Path, tmp_path: Path
) -> None:
    moto_env.agent.rootfs = sample_image
    first, second = _subnets(moto_env, 2)
    moto_env.launch_faults[(first, TYPE)] = "InsufficientInstanceCapacity"
    launches = _launches(moto_env)
    out = tmp_path / "report.json"
    proc = ami(
        moto_env, moto_env.image_id, "--report-bucket", moto_env.bucket, "--instance-type", TYPE,
        "--subnet", first, "--subnet", second, "-f", f"json:{out}",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # the sample image's findings: it was checked
    attempts = json.loads(out.read_text())["facts"]["launch"]["attempts"]
    assert [(a["subnet"], a["instance_type"], a["result"]) for a in attempts] == [
        (first, TYPE, "InsufficientInstanceCapacity"),
        (second, TYPE, "launched"),
    ]
    assert all(a["zone"] for a in attempts)
    assert launches == [(first, TYPE), (second, TYPE)]
    assert len(moto_env.launched()) == 1
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}


def test_no_capacity_anywhere_is_exit_3_with_one_line_naming_every_attempt(
    moto_env: MotoEnv, sample_image: Path
) -> None:
    moto_env.agent.rootfs = sample_image
    (subnet,) = _subnets(moto_env, 1)
    moto_env.launch_faults[("*", TYPE)] = "InsufficientInstanceCapacity"
    moto_env.launch_faults[("*", OTHER)] = "InsufficientInstanceCapacity"
    launches = _launches(moto_env)
    proc = ami(
        moto_env, moto_env.image_id, "--report-bucket", moto_env.bucket, "--subnet", subnet,
        "--instance-type", TYPE, "--instance-type", OTHER,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "RunInstances failed: InsufficientInstanceCapacity: no room in any of 2 place(s)" in last
    assert f"{TYPE} in {subnet}" in last and f"{OTHER} in {subnet}" in last
    assert "no instance was launched" in last
    assert launches == [(subnet, TYPE), (subnet, OTHER)]
    assert moto_env.launched() == []
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}  # the run's group too


def test_a_quota_error_is_not_retried_elsewhere(moto_env: MotoEnv, sample_image: Path) -> None:
    moto_env.agent.rootfs = sample_image
    first, second = _subnets(moto_env, 2)
    moto_env.launch_faults[(first, TYPE)] = "VcpuLimitExceeded"
    launches = _launches(moto_env)
    proc = ami(
        moto_env, moto_env.image_id, "--report-bucket", moto_env.bucket, "--instance-type", TYPE,
        "--subnet", first, "--subnet", second,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert "RunInstances failed: VcpuLimitExceeded" in proc.stderr.strip().splitlines()[-1]
    assert launches == [(first, TYPE)]
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}


# --- the order and the bounds, on the function itself --------------------------------------------


def _candidates(*pairs: tuple[str, str | None]) -> tuple[capacity.Candidate, ...]:
    return tuple(capacity.Candidate(kind, subnet) for kind, subnet in pairs)


def test_a_full_subnet_is_skipped_for_the_next_type_and_the_order_is_kept() -> None:
    tried: list[str] = []

    def launch(candidate: capacity.Candidate) -> str:
        tried.append(candidate.label)
        if candidate.subnet == "subnet-a":
            raise AwsError("ec2", "RunInstances", capacity.FULL_SUBNET, "no free address")
        if candidate.instance_type == "m5.large":
            raise AwsError("ec2", "RunInstances", "Unsupported", "not in this zone")
        return "i-1"

    pairs = _candidates(("m5.large", "subnet-a"), ("m5.large", "subnet-b"), ("m6i.large", "subnet-a"))
    instance, attempts = capacity.launch_across(
        (*pairs, capacity.Candidate("m6i.large", "subnet-b")), launch, lambda line: None
    )
    assert instance == "i-1"
    assert [a.result for a in attempts] == [capacity.FULL_SUBNET, "Unsupported", "skipped", "launched"]
    assert tried == ["m5.large in subnet-a", "m5.large in subnet-b", "m6i.large in subnet-b"]


def test_a_final_error_after_a_capacity_one_names_the_attempt_before() -> None:
    answers = iter(["InsufficientInstanceCapacity", "InstanceLimitExceeded"])

    def launch(candidate: capacity.Candidate) -> str:
        raise AwsError("ec2", "RunInstances", next(answers), "no")

    with pytest.raises(AwsError) as caught:
        capacity.launch_across(_candidates(("t3.micro", "subnet-a"), ("t3.micro", "subnet-b")), launch, print)
    assert caught.value.code == "InstanceLimitExceeded"
    assert "after t3.micro in subnet-a: InsufficientInstanceCapacity" in str(caught.value)


def test_types_and_subnets_are_bounded_and_never_given_twice() -> None:
    twice = LaunchSettings(instance_type="t3.micro", more_types=("t3.micro",))
    with pytest.raises(UsageError, match=r"--instance-type t3\.micro: given twice"):
        capacity.preferences(twice)
    many = LaunchSettings(
        instance_type="a.1",
        more_types=("a.2", "a.3", "a.4"),
        subnet="s-1",
        more_subnets=("s-2", "s-3", "s-4"),
    )
    with pytest.raises(UsageError, match=r"16 places to try: at most 12"):
        capacity.preferences(many)
    assert capacity.preferences(LaunchSettings()) == ([None], [None])
