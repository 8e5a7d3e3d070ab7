"""The instance type is checked against the zone it will launch in (imagelint/aws/offerings.py), from
moto's offerings (real AWS data: t3.micro is not offered in us-east-1e): refused with exit 2 before
any resource exists; the default VPC's placement passes while one of its zones offers the type."""

from __future__ import annotations

import pytest

from imagelint.aws.clients import Clients
from imagelint.aws.network import placement
from imagelint.aws.offerings import check_offered, zones_offering
from imagelint.errors import UsageError
from tests.aws.moto_env import REGION, MotoEnv
from tests.support import run_cli


def test_zones_offering_a_type_come_from_the_region(moto_env: MotoEnv, monkeypatch) -> None:
    for key, value in moto_env.env.items():
        monkeypatch.setenv(key, value)
    zones = zones_offering(Clients(REGION).ec2, "t3.micro")
    assert "us-east-1a" in zones and "us-east-1e" not in zones


def test_the_default_vpc_passes_while_one_zone_offers_the_type(moto_env: MotoEnv, monkeypatch) -> None:
    for key, value in moto_env.env.items():
        monkeypatch.setenv(key, value)
    ec2 = Clients(REGION).ec2
    where = placement(ec2, None)
    assert "us-east-1e" in {s["AvailabilityZone"] for s in where.subnets}
    check_offered(ec2, "t3.micro", where)  # RunInstances places it in a zone that offers it
    with pytest.raises(UsageError, match=r"not-a-type is not offered in .*no zone of this region"):
        check_offered(ec2, "not-a-type", where)


def test_cli_refuses_a_subnet_whose_zone_lacks_the_type_before_anything_exists(moto_env: MotoEnv) -> None:
    ec2 = moto_env.client("ec2")
    vpc = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    subnet = next(
        s["SubnetId"]
        for s in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]
        if s["AvailabilityZone"] == "us-east-1e"
    )
    proc = run_cli(
        "ami", moto_env.image_id, "--report-bucket", moto_env.bucket, "--instance-profile", moto_env.profile,
        "--subnet", subnet, "--instance-type", "t3.micro", "--poll", "0.2s", "--soak", "0", env=moto_env.env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("imagelint: error: --instance-type t3.micro is not offered in us-east-1e"), last
    assert "us-east-1a" in last and "Traceback" not in proc.stderr
    assert moto_env.launched() == [] and moto_env.alive()["groups"] == []
