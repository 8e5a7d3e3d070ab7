"""The pre-launch path check (imagelint/aws/network.py) against VPCs built in moto: private subnets
with and without the SSM and S3 endpoints, NAT, transit and internet gateways, routes it cannot see
through (a warning, never a refusal), the default VPC's subnets; and the CLI's exit 2 before launch."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from imagelint.aws import network
from imagelint.errors import UsageError
from tests.aws.moto_env import REGION, MotoEnv
from tests.support import run_cli

SSM = [f"com.amazonaws.{REGION}.{name}" for name in ("ssm", "ssmmessages", "ec2messages")]
S3 = f"com.amazonaws.{REGION}.s3"


class Vpc:
    """A fresh VPC with one subnet and its own route table (only the local route)."""

    def __init__(self, env: MotoEnv, *, public_ips: bool = False) -> None:
        self.ec2 = ec2 = env.client("ec2")
        self.vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
        self.subnet = ec2.create_subnet(
            VpcId=self.vpc, CidrBlock="10.9.1.0/24", AvailabilityZone="us-east-1a"
        )["Subnet"]["SubnetId"]
        if public_ips:
            ec2.modify_subnet_attribute(SubnetId=self.subnet, MapPublicIpOnLaunch={"Value": True})
        self.table = ec2.create_route_table(VpcId=self.vpc)["RouteTable"]["RouteTableId"]
        ec2.associate_route_table(RouteTableId=self.table, SubnetId=self.subnet)

    def endpoints(self, *services: str, private_dns: bool = True, group: str | None = None) -> list[str]:
        """Interface endpoints as a working setup has them: private DNS needs the VPC's DNS hostnames
        on (botocore's model of CreateVpcEndpoint; moto creates them whatever the attribute), and their
        group takes HTTPS from the VPC (``group``: another one)."""
        if private_dns:
            self.ec2.modify_vpc_attribute(VpcId=self.vpc, EnableDnsHostnames={"Value": True})
        if group is None:
            group = self.ec2.create_security_group(
                GroupName=f"endpoints-{uuid.uuid4().hex[:8]}", Description="endpoints", VpcId=self.vpc
            )["GroupId"]
            self.ec2.authorize_security_group_ingress(
                GroupId=group,
                IpPermissions=[
                    {
                        "IpProtocol": "tcp",
                        "FromPort": 443,
                        "ToPort": 443,
                        "IpRanges": [{"CidrIp": "10.9.0.0/16"}],
                    }
                ],
            )
        return [
            self.ec2.create_vpc_endpoint(
                VpcId=self.vpc,
                ServiceName=service,
                VpcEndpointType="Interface",
                SubnetIds=[self.subnet],
                PrivateDnsEnabled=private_dns,
                SecurityGroupIds=[group],
            )["VpcEndpoint"]["VpcEndpointId"]
            for service in services
        ]

    def s3_gateway(self, table: str | None = None) -> None:
        self.ec2.create_vpc_endpoint(
            VpcId=self.vpc, ServiceName=S3, VpcEndpointType="Gateway", RouteTableIds=[table or self.table]
        )

    def default_route(self, **target: str) -> None:
        self.ec2.create_route(RouteTableId=self.table, DestinationCidrBlock="0.0.0.0/0", **target)

    def igw(self) -> str:
        igw = self.ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
        self.ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=self.vpc)
        return str(igw)

    def check(self, subnet: str | None = None) -> list[str]:
        return network.check_reachability(
            self.ec2, network.placement(self.ec2, subnet or self.subnet), REGION
        )


def _refusal(vpc: Vpc) -> str:
    with pytest.raises(UsageError) as caught:
        vpc.check()
    return str(caught.value)


def test_private_subnet_without_endpoints_is_refused_naming_each(moto_env: MotoEnv) -> None:
    vpc = Vpc(moto_env)
    message = _refusal(vpc)
    assert message.startswith(f"{vpc.subnet} cannot reach SSM and S3 (no default route to a NAT")
    for service in [*SSM, S3]:
        assert service in message
    assert f"a gateway endpoint on {vpc.table}" in message


def test_private_subnet_with_the_four_endpoints_passes(moto_env: MotoEnv) -> None:
    vpc = Vpc(moto_env)
    vpc.endpoints(*SSM)
    vpc.s3_gateway()
    assert vpc.check() == []


def test_an_s3_interface_endpoint_serves_too(moto_env: MotoEnv) -> None:
    vpc = Vpc(moto_env)
    vpc.endpoints(*SSM, S3)
    assert vpc.check() == []


def test_each_missing_piece_is_named_alone(moto_env: MotoEnv) -> None:
    vpc = Vpc(moto_env)
    vpc.endpoints(SSM[0], SSM[2])
    vpc.endpoints(SSM[1], private_dns=False)  # the agent's host names would resolve to the public endpoint
    other = vpc.ec2.create_route_table(VpcId=vpc.vpc)["RouteTable"]["RouteTableId"]
    vpc.s3_gateway(other)  # on another subnet's table: no route for this one
    named = re.findall(r"com\.amazonaws\.[a-z0-9-]+\.(\w+)", _refusal(vpc))
    assert named == ["ssmmessages", "s3"]


def test_nat_gateway_route_is_a_path(moto_env: MotoEnv) -> None:
    vpc = Vpc(moto_env)
    public = vpc.ec2.create_subnet(VpcId=vpc.vpc, CidrBlock="10.9.2.0/24")["Subnet"]["SubnetId"]
    vpc.igw()
    eip = vpc.ec2.allocate_address(Domain="vpc")["AllocationId"]
    nat = vpc.ec2.create_nat_gateway(SubnetId=public, AllocationId=eip)["NatGateway"]["NatGatewayId"]
    vpc.default_route(NatGatewayId=nat)
    assert vpc.check() == []


def test_transit_gateway_route_is_a_path(moto_env: MotoEnv) -> None:
    vpc = Vpc(moto_env)
    tgw = vpc.ec2.create_transit_gateway()["TransitGateway"]["TransitGatewayId"]
    vpc.ec2.create_transit_gateway_vpc_attachment(TransitGatewayId=tgw, VpcId=vpc.vpc, SubnetIds=[vpc.subnet])
    vpc.default_route(TransitGatewayId=tgw)
    assert vpc.check() == []


def test_internet_gateway_needs_public_ips(moto_env: MotoEnv) -> None:
    private = Vpc(moto_env)
    igw = private.igw()
    private.default_route(GatewayId=igw)
    message = _refusal(private)
    assert f"its default route goes to {igw}, but the subnet gives no public IPv4 address" in message
    private.ec2.modify_subnet_attribute(SubnetId=private.subnet, MapPublicIpOnLaunch={"Value": True})
    assert private.check() == []


def test_a_route_it_cannot_see_through_is_a_warning_not_a_refusal(moto_env: MotoEnv) -> None:
    vpc = Vpc(moto_env)
    vgw = vpc.ec2.create_vpn_gateway(Type="ipsec.1")["VpnGateway"]["VpnGatewayId"]
    vpc.ec2.attach_vpn_gateway(VpnGatewayId=vgw, VpcId=vpc.vpc)
    vpc.default_route(GatewayId=vgw)  # e.g. to an on-premises proxy
    warnings = vpc.check()
    assert (
        warnings[0] == f"{vpc.subnet}: its default route goes to {vgw}, which this check cannot see through"
    )
    assert warnings[1].startswith(f"{vpc.subnet}: without that path it would need VPC endpoints {SSM[0]}")
    vpc.endpoints(*SSM)
    vpc.s3_gateway()
    assert vpc.check() == []  # the endpoints make the route irrelevant: nothing to warn about


def test_an_ipv6_only_default_route_is_a_warning(moto_env: MotoEnv) -> None:
    vpc = Vpc(moto_env)
    eigw = vpc.ec2.create_egress_only_internet_gateway(VpcId=vpc.vpc)["EgressOnlyInternetGateway"][
        "EgressOnlyInternetGatewayId"
    ]
    vpc.ec2.create_route(
        RouteTableId=vpc.table, DestinationIpv6CidrBlock="::/0", EgressOnlyInternetGatewayId=eigw
    )
    warnings = vpc.check()
    assert warnings[0] == f"{vpc.subnet}: only an IPv6 default route (to {eigw}) may get out"


def test_a_subnet_without_its_own_table_uses_the_main_one(moto_env: MotoEnv) -> None:
    vpc = Vpc(moto_env)
    loose = vpc.ec2.create_subnet(VpcId=vpc.vpc, CidrBlock="10.9.3.0/24")["Subnet"]
    vpc.ec2.modify_subnet_attribute(SubnetId=loose["SubnetId"], MapPublicIpOnLaunch={"Value": True})
    main = vpc.ec2.describe_route_tables(
        Filters=[{"Name": "vpc-id", "Values": [vpc.vpc]}, {"Name": "association.main", "Values": ["true"]}]
    )["RouteTables"][0]["RouteTableId"]
    vpc.ec2.create_route(RouteTableId=main, DestinationCidrBlock="0.0.0.0/0", GatewayId=vpc.igw())
    assert vpc.check(loose["SubnetId"]) == []  # the main table's internet route
    with pytest.raises(UsageError):
        vpc.check()  # its own table has none


def _default_subnets(env: MotoEnv) -> list[dict[str, Any]]:
    return env.client("ec2").describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])[
        "Subnets"
    ]


def test_default_vpc_its_default_subnets_are_checked(moto_env: MotoEnv) -> None:
    ec2 = moto_env.client("ec2")
    where = network.placement(ec2, None)
    subnets = _default_subnets(moto_env)
    assert len(where.subnets) == len(subnets) > 1
    assert network.check_reachability(ec2, where, REGION) == []  # main table: internet gateway, public IPs
    private = ec2.create_route_table(VpcId=where.vpc_id)["RouteTable"]["RouteTableId"]
    ec2.associate_route_table(RouteTableId=private, SubnetId=subnets[0]["SubnetId"])
    (warning,) = network.check_reachability(ec2, where, REGION)
    assert (
        warning.startswith(f"{subnets[0]['SubnetId']} cannot reach SSM and S3") and "give --subnet" in warning
    )
    for subnet in subnets[1:]:
        ec2.associate_route_table(RouteTableId=private, SubnetId=subnet["SubnetId"])
    with pytest.raises(UsageError, match=r"^the default VPC's subnets \(\d+\) cannot reach SSM and S3"):
        network.check_reachability(ec2, where, REGION)


def test_cli_refuses_a_private_subnet_before_launch(moto_env: MotoEnv) -> None:
    vpc = Vpc(moto_env)
    proc = run_cli(
        "ami", moto_env.image_id, "--report-bucket", moto_env.bucket, "--instance-profile", moto_env.profile,
        "--subnet", vpc.subnet, "--poll", "0.2s", "--soak", "0", env=moto_env.env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"imagelint: error: {vpc.subnet} cannot reach SSM and S3"), last
    assert S3 in last and "Traceback" not in proc.stderr
    assert moto_env.launched() == [] and moto_env.alive()["groups"] == []


def test_cli_with_skip_network_check_launches_and_warns(moto_env: MotoEnv, sample_image: Path) -> None:
    moto_env.agent.rootfs = sample_image
    vpc = Vpc(moto_env)
    proc = run_cli(
        "ami", moto_env.image_id, "--report-bucket", moto_env.bucket, "--instance-profile", moto_env.profile,
        "--subnet", vpc.subnet, "--poll", "0.2s", "--soak", "0", "--skip-network-check", env=moto_env.env,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]  # launched, audited: the sample fails
    assert "going on (--skip-network-check)" in proc.stderr and len(moto_env.launched()) == 1


def test_skip_network_check_makes_the_refusal_a_warning(moto_env: MotoEnv) -> None:
    vpc = Vpc(moto_env)
    assert "--skip-network-check" in _refusal(vpc)
    warnings = network.check_reachability(
        vpc.ec2, network.placement(vpc.ec2, vpc.subnet), REGION, refuse=False
    )
    assert len(warnings) == 1 and warnings[0].endswith("going on (--skip-network-check)"), warnings


def test_a_bucket_in_another_region_needs_a_route_not_an_endpoint(moto_env: MotoEnv) -> None:
    vpc = Vpc(moto_env)
    vpc.endpoints(*SSM)
    vpc.s3_gateway()
    where = network.placement(vpc.ec2, vpc.subnet)
    assert network.check_reachability(vpc.ec2, where, REGION, bucket_region=REGION) == []
    with pytest.raises(UsageError) as caught:
        network.check_reachability(vpc.ec2, where, REGION, bucket_region="eu-central-1")
    assert "a route to S3 in eu-central-1, the report bucket's region" in str(caught.value)
    nat = vpc.ec2.create_nat_gateway(SubnetId=vpc.subnet)["NatGateway"]["NatGatewayId"]
    vpc.default_route(NatGatewayId=nat)  # a route out reaches any region's bucket
    assert network.check_reachability(vpc.ec2, where, REGION, bucket_region="eu-central-1") == []


def test_chinas_cn_prefixed_endpoint_names_count() -> None:
    subnet = {"SubnetId": "subnet-1"}
    table = {"RouteTableId": "rtb-1", "Routes": []}
    names = [f"cn.com.amazonaws.cn-north-1.{n}" for n in ("ssm", "ssmmessages", "ec2messages", "s3")]
    endpoints = [
        {"VpcEndpointType": "Interface", "ServiceName": n, "State": "available", "PrivateDnsEnabled": True}
        for n in names
    ]
    assert network.judge(subnet, table, endpoints, "cn-north-1").missing == ()
    assert network.judge(subnet, table, endpoints[1:], "cn-north-1").missing == (
        "com.amazonaws.cn-north-1.ssm",
    )


def test_cli_runs_in_a_private_subnet_with_endpoints(moto_env: MotoEnv, sample_image: Path) -> None:
    """A setup that works is not refused: no route out, the four endpoints, the run's own group."""
    moto_env.agent.rootfs = sample_image
    vpc = Vpc(moto_env)
    vpc.endpoints(*SSM)
    vpc.s3_gateway()
    proc = run_cli(
        "ami", moto_env.image_id, "--report-bucket", moto_env.bucket, "--instance-profile", moto_env.profile,
        "--subnet", vpc.subnet, "--poll", "0.2s", "--soak", "0", env=moto_env.env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # the sample image's findings
    assert "warning" not in proc.stderr
    (instance,) = moto_env.launched()
    described = moto_env.client("ec2").describe_instances(InstanceIds=[instance])["Reservations"][0][
        "Instances"
    ][0]
    assert described["SubnetId"] == vpc.subnet
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}


def test_a_public_address_only_where_the_path_needs_one(moto_env: MotoEnv) -> None:
    """Security Hub EC2.9: a --subnet that maps public IPv4 addresses gives the instance none when its
    path to SSM and S3 is a NAT gateway or VPC endpoints; only an internet-gateway path needs one."""
    vpc = Vpc(moto_env, public_ips=True)
    where = network.placement(vpc.ec2, vpc.subnet)
    vpc.default_route(GatewayId=vpc.igw())
    assert network.public_ip_needed(vpc.ec2, where, REGION) is True
    vpc.endpoints(*SSM)
    vpc.s3_gateway()
    assert network.public_ip_needed(vpc.ec2, where, REGION) is False  # the endpoints are enough
    assert network.public_ip_needed(vpc.ec2, where, REGION, bucket_region="eu-central-1") is True
    private = Vpc(moto_env)  # maps no address: nothing to decide
    assert (
        network.public_ip_needed(private.ec2, network.placement(private.ec2, private.subnet), REGION) is None
    )
    assert network.public_ip_needed(vpc.ec2, network.placement(vpc.ec2, None), REGION) is None


def test_cli_launches_without_a_public_address_where_endpoints_reach_everything(
    moto_env: MotoEnv, sample_image: Path
) -> None:
    moto_env.agent.rootfs = sample_image
    vpc = Vpc(moto_env, public_ips=True)
    vpc.endpoints(*SSM)
    vpc.s3_gateway()
    launches: list[dict[str, list[str]]] = []
    moto_env.on_call["RunInstances"] = launches.append
    proc = run_cli(
        "ami", moto_env.image_id, "--report-bucket", moto_env.bucket, "--instance-profile", moto_env.profile,
        "--subnet", vpc.subnet, "--poll", "0.2s", "--soak", "0", env=moto_env.env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # the sample image's findings
    assert len(launches) == 2  # the DryRun and the launch, the same request
    for form in launches:
        assert form["NetworkInterface.1.AssociatePublicIpAddress"] == ["false"]
        assert form["NetworkInterface.1.SubnetId"] == [vpc.subnet] and "SubnetId" not in form
    (instance,) = moto_env.launched()
    described = moto_env.client("ec2").describe_instances(InstanceIds=[instance])["Reservations"][0][
        "Instances"
    ][0]
    assert described["SubnetId"] == vpc.subnet and "PublicIpAddress" not in described
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}
