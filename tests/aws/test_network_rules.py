"""The network pre-flight past the routes (imagelint/aws/network_rules.py, vpc_dns.py) against VPCs
built in moto: a VPC whose DHCP options name its own DNS servers gets DNS egress rules in the run's
group; DNS support off, a network ACL denying HTTPS, a ``--security-group`` without HTTPS egress and
an endpoint group without HTTPS ingress each stop the run before anything exists (exit 2, one line
naming the attribute, rule or group); what cannot be judged is listed in the report's
``facts.network.not_judged``.

moto does not filter any packet, and accepts private-DNS endpoints in a VPC whose DNS hostnames are
off and endpoints with no group (AWS gives them the VPC's default group): the judgements here are of
the described rules, which is all the pre-flight reads too; the endpoints are built as AWS has them
(:class:`tests.aws.test_network.Vpc`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from imagelint.aws import network, network_rules, policy
from imagelint.errors import UsageError
from tests.aws.conftest import Recorder
from tests.aws.moto_env import REGION, MotoEnv, dry_run
from tests.aws.test_ami_hardened import _valid
from tests.aws.test_network import S3, SSM, Vpc
from tests.aws.test_policy import _actions, _allowed
from tests.support import run_cli

CUSTOM_DNS = ["10.9.0.53", "10.20.0.53"]  # one inside the VPC, one outside it (on premises, say)


def _public(env: MotoEnv) -> Vpc:
    """A VPC whose subnet reaches SSM and S3 through an internet gateway (public addresses)."""
    vpc = Vpc(env, public_ips=True)
    vpc.default_route(GatewayId=vpc.igw())
    return vpc


def _dhcp(vpc: Vpc, *servers: str) -> str:
    options = vpc.ec2.create_dhcp_options(
        DhcpConfigurations=[{"Key": "domain-name-servers", "Values": list(servers)}]
    )["DhcpOptions"]["DhcpOptionsId"]
    vpc.ec2.associate_dhcp_options(DhcpOptionsId=options, VpcId=vpc.vpc)
    return str(options)


def _acl(vpc: Vpc, *entries: dict[str, Any]) -> str:
    """A network ACL of ``entries`` (each ``create_network_acl_entry``'s parameters), on the subnet."""
    acl = vpc.ec2.create_network_acl(VpcId=vpc.vpc)["NetworkAcl"]["NetworkAclId"]
    for entry in entries:
        vpc.ec2.create_network_acl_entry(NetworkAclId=acl, CidrBlock="0.0.0.0/0", **entry)
    (current,) = vpc.ec2.describe_network_acls(
        Filters=[{"Name": "association.subnet-id", "Values": [vpc.subnet]}]
    )["NetworkAcls"]
    association = next(a for a in current["Associations"] if a["SubnetId"] == vpc.subnet)
    vpc.ec2.replace_network_acl_association(
        AssociationId=association["NetworkAclAssociationId"], NetworkAclId=acl
    )
    return str(acl)


ALLOW_ALL_IN = {"RuleNumber": 100, "Protocol": "-1", "RuleAction": "allow", "Egress": False}
ALLOW_ALL_OUT = {"RuleNumber": 200, "Protocol": "-1", "RuleAction": "allow", "Egress": True}


def _refused(env: MotoEnv, vpc: Vpc, *args: str) -> str:
    """Run `ami` on ``vpc``'s subnet: it must stop before anything exists; its one error line."""
    proc = run_cli(
        "ami", env.image_id, "--report-bucket", env.bucket, "--instance-profile", env.profile,
        "--subnet", vpc.subnet, "--poll", "0.2s", "--soak", "0", *args, env=env.env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert env.launched() == [] and env.alive()["groups"] == []  # nothing was created
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"imagelint: error: {vpc.subnet}: once booted the SSM agent could not register")
    return last


def test_custom_dhcp_dns_gets_dns_egress_in_the_runs_group(
    recorded: Recorder, moto_env: MotoEnv, sample_image: Path, tmp_path: Path
) -> None:
    """Every request valid for botocore's model and in the runner's policy; the group as EC2 has it
    at the launch; the report names what it did not judge."""
    from imagelint.aws.ec2 import LaunchSettings
    from imagelint.commands.ami import AmiOptions, Timing, run_ami
    from imagelint.formats.outputs import OutputSpec
    from imagelint.session import RunOptions

    moto_env.agent.rootfs = sample_image
    vpc = _public(moto_env)
    options_id = _dhcp(vpc, ",".join(CUSTOM_DNS))  # as the console writes them: one comma-separated value
    seen: list[dict[str, Any]] = []

    def launch(form: dict[str, list[str]]) -> None:
        if not dry_run(form) and "SecurityGroupId.1" in form:
            ec2 = moto_env.client("ec2", direct=True)
            seen.extend(ec2.describe_security_groups(GroupIds=form["SecurityGroupId.1"])["SecurityGroups"])

    moto_env.on_call["RunInstances"] = launch
    out = tmp_path / "r.json"
    options = AmiOptions(
        images=[moto_env.image_id],
        report_bucket=moto_env.bucket,
        launch=LaunchSettings(instance_type="t3.micro", instance_profile=moto_env.profile, subnet=vpc.subnet),
        timing=Timing(poll=0.2, ssm_timeout=30),
        run=RunOptions(outputs=[OutputSpec("json", out)]),
    )
    assert run_ami(options).value == "fail"  # the sample image's findings: the run went through
    (group,) = seen
    rules = {
        (r["IpProtocol"], r.get("FromPort"), r.get("ToPort")): sorted(x["CidrIp"] for x in r["IpRanges"])
        for r in group["IpPermissionsEgress"]
    }
    servers = sorted(f"{s}/32" for s in CUSTOM_DNS)
    assert rules == {("tcp", 443, 443): ["0.0.0.0/0"], ("udp", 53, 53): servers, ("tcp", 53, 53): servers}
    assert group["IpPermissions"] == []

    network = json.loads(out.read_text())["facts"]["network"]
    assert network["dhcp_options"] == options_id and network["resolvers"] == CUSTOM_DNS
    assert network["enableDnsSupport"] is True
    assert f"the route to DNS server 10.20.0.53, outside {vpc.vpc}" in network["not_judged"]
    assert f"{vpc.subnet}: udp/53 to DNS server 10.20.0.53" in network["judged"]  # the network ACL's

    _valid(recorded)
    direct = _actions(policy.runner_policy(), direct=True)
    added = {"ec2:DescribeVpcAttribute", "ec2:DescribeDhcpOptions", "ec2:DescribeNetworkAcls"}
    assert added <= recorded.calls
    assert all(_allowed(c, direct) for c in added | {"ec2:DescribeSecurityGroups", "ec2:DescribeVpcs"})


def test_the_amazon_resolver_needs_no_rule() -> None:
    from imagelint.aws.run_group import dns_egress
    from imagelint.aws.vpc_dns import VpcDns

    amazon = VpcDns("vpc-1", "10.9.0.0/16", ("10.9.0.0/16",), "dopt-1", True, True, ("AmazonProvidedDNS",))
    assert amazon.resolvers() == ("10.9.0.2", "169.254.169.253") and amazon.custom == ()
    assert dns_egress(amazon.custom) == []
    mixed = VpcDns(
        "vpc-1", "10.9.0.0/16", ("10.9.0.0/16",), "dopt-1", False, True, ("10.9.0.53", "AmazonProvidedDNS")
    )
    assert mixed.custom == ("10.9.0.53",)
    assert [r["IpProtocol"] for r in dns_egress(mixed.custom)] == ["udp", "tcp"]


def test_dns_support_off_is_refused_naming_the_attribute(moto_env: MotoEnv) -> None:
    vpc = _public(moto_env)
    options = _dhcp(vpc, "AmazonProvidedDNS")
    vpc.ec2.modify_vpc_attribute(VpcId=vpc.vpc, EnableDnsSupport={"Value": False})
    last = _refused(moto_env, vpc)
    assert f"{vpc.vpc} has enableDnsSupport off, so the Amazon DNS server ({options}) answers nothing" in last


def test_private_dns_endpoints_need_the_vpcs_dns_hostnames() -> None:
    """The state AWS would not let moto's VPC reach by CreateVpcEndpoint, judged on its own."""
    from imagelint.aws import vpc_dns

    dns = vpc_dns.VpcDns(
        "vpc-1", "10.9.0.0/16", ("10.9.0.0/16",), "dopt-1", True, False, ("AmazonProvidedDNS",)
    )
    (problem,) = vpc_dns.problems(dns, ["vpce-1", "vpce-2"])
    assert problem == (
        "the interface endpoints vpce-1, vpce-2 are reached by their private DNS names, which need "
        "enableDnsSupport and enableDnsHostnames on, and vpc-1 has enableDnsHostnames off"
    )
    assert vpc_dns.problems(dns, []) == []  # no endpoint on the path: hostnames do not matter


def test_a_network_acl_denying_https_is_refused_naming_the_rule(moto_env: MotoEnv) -> None:
    vpc = _public(moto_env)
    https = {"Protocol": "6", "PortRange": {"From": 443, "To": 443}}
    acl = _acl(
        vpc, ALLOW_ALL_IN, ALLOW_ALL_OUT, {"RuleNumber": 90, "RuleAction": "deny", "Egress": True, **https}
    )
    last = _refused(moto_env, vpc)
    assert f"{vpc.subnet}: network ACL {acl} rule 90 denies tcp/443 to {SSM[0]} (public)" in last


def test_a_network_acl_without_the_replies_is_refused(moto_env: MotoEnv) -> None:
    """Stateless: the replies need their own inbound rule, to Linux's ephemeral ports."""
    vpc = _public(moto_env)
    windows = {"Protocol": "6", "PortRange": {"From": 49152, "To": 65535}}
    acl = _acl(vpc, ALLOW_ALL_OUT, {"RuleNumber": 100, "RuleAction": "allow", "Egress": False, **windows})
    with pytest.raises(UsageError) as caught:
        network_rules.check_filters(vpc.ec2, network.placement(vpc.ec2, vpc.subnet), REGION)
    assert f"network ACL {acl} rule * denies its replies from {SSM[0]} (public) to ports 32768-61000" in str(
        caught.value
    )
    # --skip-network-check: a warning, and the run goes on
    judged = network_rules.check_filters(
        vpc.ec2, network.placement(vpc.ec2, vpc.subnet), REGION, refuse=False
    )
    assert judged.warnings[-1].endswith("going on (--skip-network-check)")


def test_a_user_group_without_https_egress_is_refused(moto_env: MotoEnv) -> None:
    vpc = _public(moto_env)
    group = vpc.ec2.create_security_group(GroupName="web-only", Description="web", VpcId=vpc.vpc)["GroupId"]
    (default,) = vpc.ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"][0][
        "IpPermissionsEgress"
    ]
    vpc.ec2.revoke_security_group_egress(GroupId=group, IpPermissions=[default])
    vpc.ec2.authorize_security_group_egress(
        GroupId=group,
        IpPermissions=[
            {"IpProtocol": "tcp", "FromPort": 80, "ToPort": 80, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}
        ],
    )
    last = _refused(moto_env, vpc, "--security-group", group)
    assert f"--security-group {group}: no rule allows tcp/443 to {SSM[0]} (public)" in last


def test_a_user_group_to_a_prefix_list_is_not_judged(moto_env: MotoEnv) -> None:
    vpc = _public(moto_env)
    group = vpc.ec2.create_security_group(GroupName="s3-list", Description="s3", VpcId=vpc.vpc)["GroupId"]
    (default,) = vpc.ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"][0][
        "IpPermissionsEgress"
    ]
    vpc.ec2.revoke_security_group_egress(GroupId=group, IpPermissions=[default])
    plist = vpc.ec2.create_managed_prefix_list(PrefixListName="s3", MaxEntries=2, AddressFamily="IPv4")
    plist_id = plist["PrefixList"]["PrefixListId"]
    vpc.ec2.authorize_security_group_egress(
        GroupId=group,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 443,
                "ToPort": 443,
                "PrefixListIds": [{"PrefixListId": plist_id}],
            }
        ],
    )
    judged = network_rules.check_filters(
        vpc.ec2, network.placement(vpc.ec2, vpc.subnet), REGION, groups=(group,)
    )
    assert (
        f"--security-group {group}: rules allow tcp/443 to {S3} (public) only to prefix list {plist_id}"
        in (judged.not_judged)
    )


def test_an_endpoint_group_without_https_ingress_is_refused(moto_env: MotoEnv) -> None:
    vpc = Vpc(moto_env)
    bare = vpc.ec2.create_security_group(GroupName="bare", Description="bare", VpcId=vpc.vpc)["GroupId"]
    endpoints = vpc.endpoints(*SSM, group=bare)
    vpc.s3_gateway()
    last = _refused(moto_env, vpc)
    assert (
        f"the security groups {bare} of endpoint {endpoints[0]} ({SSM[0]}): no rule allows tcp/443 from "
        f"{vpc.subnet} (10.9.1.0/24)"
    ) in last


def test_an_endpoint_without_a_group_has_the_vpcs_default_one(moto_env: MotoEnv) -> None:
    """AWS gives it the VPC's default group, which takes traffic only from its own members: not from
    the run's own group; from a --security-group that is the default group."""
    vpc = Vpc(moto_env)
    vpc.ec2.modify_vpc_attribute(VpcId=vpc.vpc, EnableDnsHostnames={"Value": True})
    endpoints = [
        vpc.ec2.create_vpc_endpoint(
            VpcId=vpc.vpc, ServiceName=service, VpcEndpointType="Interface", SubnetIds=[vpc.subnet],
            PrivateDnsEnabled=True,
        )["VpcEndpoint"]
        for service in SSM
    ]  # fmt: skip
    assert all(e.get("Groups", []) == [] for e in endpoints)  # moto lists none
    vpc.s3_gateway()
    (default,) = vpc.ec2.describe_security_groups(
        Filters=[{"Name": "vpc-id", "Values": [vpc.vpc]}, {"Name": "group-name", "Values": ["default"]}]
    )["SecurityGroups"]
    # its inbound rule as AWS makes it (moto's default group has none): from its own members
    vpc.ec2.authorize_security_group_ingress(
        GroupId=default["GroupId"],
        IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": default["GroupId"]}]}],
    )
    where = network.placement(vpc.ec2, vpc.subnet)
    blocked = network_rules.judge(vpc.ec2, where, REGION).blocked[vpc.subnet]
    assert [p.split(":")[0] for p in blocked] == [
        f"the security groups {default['GroupId']} of endpoint {e['VpcEndpointId']} ({e['ServiceName']})"
        for e in endpoints
    ]
    assert network_rules.judge(vpc.ec2, where, REGION, groups=(default["GroupId"],)).blocked == {}


def test_what_is_not_judged_is_in_the_report(moto_env: MotoEnv, sample_image: Path, tmp_path: Path) -> None:
    """Endpoints and the VPC's own DNS server: the endpoints' policies and the server's forwarding
    of their private names are named, not passed over."""
    moto_env.agent.rootfs = sample_image
    vpc = Vpc(moto_env)
    endpoints = vpc.endpoints(*SSM)
    vpc.s3_gateway()
    _dhcp(vpc, "10.9.0.53")
    out = tmp_path / "r.json"
    proc = run_cli(
        "ami", moto_env.image_id, "--report-bucket", moto_env.bucket, "--instance-profile", moto_env.profile,
        "--subnet", vpc.subnet, "--poll", "0.2s", "--soak", "0", "-f", f"json:{out}", env=moto_env.env,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]  # launched and audited: the sample image's findings
    network = json.loads(out.read_text())["facts"]["network"]
    not_judged = network["not_judged"]
    for endpoint, service in zip(endpoints, SSM, strict=True):
        assert f"the policy of endpoint {endpoint} ({service})" in not_judged
    assert any(n.startswith("the policy of endpoint vpce-") and n.endswith(f"({S3})") for n in not_judged)
    assert (
        f"whether the DNS servers 10.9.0.53 forward the private DNS names of {', '.join(endpoints)} to the "
        "VPC's Amazon resolver"
    ) in not_judged
    assert any(
        j.startswith("the security groups sg-") and j.endswith(f"from {vpc.subnet} (10.9.1.0/24)")
        for j in network["judged"]
    )
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}
