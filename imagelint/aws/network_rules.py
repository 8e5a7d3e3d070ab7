"""Once booted, will the instance find its endpoints by name and get through the packet filters on
its way to them? Judged before launch, after the route check (:mod:`imagelint.aws.network`), so
that a network that would keep the SSM agent from registering stops the run in seconds, naming
the cause, instead of ending a 10-minute wait by blaming the image.

Read: the VPC's DNS settings and DHCP options (:mod:`imagelint.aws.vpc_dns`), its VPC endpoints,
the network ACL of each launch subnet and of each subnet of an interface endpoint on the path
(``DescribeNetworkAcls``), the endpoints' subnets (``DescribeSubnets``), the ``--security-group``
groups and the endpoints' groups (``DescribeSecurityGroups``).

Where the instance's HTTPS goes (each of ``ssm``, ``ssmmessages``, ``ec2messages``, ``s3``): the
interface endpoint with private DNS that serves it (the addresses of its subnets, its groups), else a
public address (through a NAT, transit or internet gateway, or S3's gateway endpoint). Judged
(:mod:`imagelint.aws.firewall`), each a refusal naming the rule or group when it fails:

- DNS: a resolver that answers (``enableDnsSupport`` for the Amazon one), and for endpoints reached
  by private DNS, ``enableDnsSupport`` and ``enableDnsHostnames`` on;
- the launch subnet's network ACL: out tcp/443 to each destination and UDP 53 to each custom DNS
  server outside the subnet, and in their replies to the ephemeral ports;
- ``--security-group``'s egress (the union of the groups): tcp/443 to each destination (a rule to a
  CIDR that holds its addresses, or to one of an endpoint's groups) and UDP 53 to each custom DNS
  server (the run's own group is made with those rules: :mod:`imagelint.aws.run_group`);
- each interface endpoint on the path: its groups' ingress tcp/443 from the launch subnet's CIDR (or
  from a ``--security-group``), and its subnets' network ACLs (in tcp/443 from the launch subnet, out
  the replies to its ephemeral ports).

Named in the report as not judged (``facts.network.not_judged``), never silently passed: the
endpoints' policies, rules whose reach depends on what is not read here (a prefix list, a CIDR that
holds only part of the destination), custom DNS servers' forwarding and routes, a VPC without DHCP
options. IPv6 paths are not judged.
"""

from __future__ import annotations

import ipaddress
from dataclasses import field
from typing import Any

from imagelint.aws import firewall, vpc_dns
from imagelint.aws.errors import paginate
from imagelint.aws.firewall import EPHEMERAL, Flow
from imagelint.aws.network import SSM_SERVICES, Placement, interface_endpoint
from imagelint.errors import UsageError
from imagelint.records import dataclass

PUBLIC = "0.0.0.0/0"  # the addresses of a public endpoint: not known in advance


@dataclass(frozen=True)
class Destination:
    """Where the instance's HTTPS for one service goes: an interface endpoint, or a public address."""

    service: str
    cidrs: tuple[str, ...] = (PUBLIC,)
    endpoint: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        return f"{self.service} ({self.endpoint['VpcEndpointId'] if self.endpoint else 'public'})"

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(str(g["GroupId"]) for g in (self.endpoint or {}).get("Groups", []))


@dataclass
class Judged:
    """The answer: what was judged and passed, the refusals (per launch subnet), what is not judged."""

    dns: vpc_dns.VpcDns
    judged: list[str] = field(default_factory=list)
    not_judged: list[str] = field(default_factory=list)
    blocked: dict[str, list[str]] = field(default_factory=dict)  # subnet → what stops the instance
    warnings: list[str] = field(default_factory=list)

    def fact(self) -> dict[str, Any]:
        """``facts.network`` of the report."""
        return {
            **self.dns.fact(),
            "judged": list(dict.fromkeys(self.judged)),
            "not_judged": list(dict.fromkeys(self.not_judged)),
        }


def destinations(
    ec2: Any, endpoints: list[dict[str, Any]], region: str, bucket_region: str | None = None
) -> list[Destination]:
    """Where the SSM agent's and the upload's HTTPS goes, service by service."""
    out: list[Destination] = []
    for name in (*SSM_SERVICES, "s3"):
        service = f"com.amazonaws.{region}.{name}"
        endpoint = interface_endpoint(endpoints, service)
        if endpoint is None:
            out.append(Destination(service))
            continue
        subnets = paginate(ec2, "describe_subnets", "Subnets", SubnetIds=list(endpoint.get("SubnetIds", [])))
        cidrs = tuple(str(s["CidrBlock"]) for s in subnets)
        if not endpoint.get("Groups"):
            # botocore's model of CreateVpcEndpoint: "If this parameter is not specified, we use the
            # default security group for the VPC" (AWS lists it; moto lists none)
            endpoint = {**endpoint, "Groups": _default_group(ec2, str(endpoint["VpcId"]))}
        out.append(Destination(service, cidrs or (PUBLIC,), endpoint))
    if bucket_region and bucket_region != region:
        out.append(Destination(f"com.amazonaws.{bucket_region}.s3"))  # reached by a route, not an endpoint
    return out


def _default_group(ec2: Any, vpc_id: str) -> list[dict[str, str]]:
    found = paginate(
        ec2,
        "describe_security_groups",
        "SecurityGroups",
        Filters=[{"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "group-name", "Values": ["default"]}],
    )
    return [{"GroupId": str(g["GroupId"]), "GroupName": "default"} for g in found]


def judge(
    ec2: Any,
    where: Placement,
    region: str,
    *,
    groups: tuple[str, ...] = (),
    bucket_region: str | None = None,
) -> Judged:
    """Judge the DNS and the filters on the path of an instance placed at ``where`` (with the
    ``--security-group`` ``groups``, or the run's own group when none)."""
    dns = vpc_dns.read(ec2, where.vpc_id)
    endpoints = paginate(
        ec2, "describe_vpc_endpoints", "VpcEndpoints", Filters=[{"Name": "vpc-id", "Values": [where.vpc_id]}]
    )
    targets = destinations(ec2, endpoints, region, bucket_region)
    private = [str(t.endpoint["VpcEndpointId"]) for t in targets if t.endpoint]
    out = Judged(dns, not_judged=vpc_dns.not_judged(dns, private))
    common = vpc_dns.problems(dns, private)
    if not common:
        out.judged.append(f"DNS: the VPC's settings give the instance {', '.join(dns.resolvers())} to ask")
    out.not_judged += _policies(endpoints, targets)
    custom = [s for s in dns.custom if ipaddress.ip_address(s).version == 4]
    out.not_judged += [f"IPv6 DNS server {s}: its rules" for s in dns.custom if s not in custom]
    if groups:
        common += _user_groups(ec2, groups, targets, custom, out)
    acls = _Acls(ec2)
    endpoint_groups = _endpoint_groups(ec2, targets)
    for subnet in where.subnets:
        found = list(common)
        found += _launch_acl(acls, subnet, targets, custom, out)
        found += _endpoints(acls, endpoint_groups, subnet, targets, groups, out)
        if found:
            out.blocked[str(subnet["SubnetId"])] = found
    return out


def check_filters(
    ec2: Any,
    where: Placement,
    region: str,
    *,
    groups: tuple[str, ...] = (),
    refuse: bool = True,
    bucket_region: str | None = None,
) -> Judged:
    """:func:`judge`, and refuse (exit 2, one line) when no launch subnet gets through; with
    ``refuse=False`` (``--skip-network-check``) the refusal becomes a warning. Subnets RunInstances may
    pick that would not get through are warnings."""
    out = judge(ec2, where, region, groups=groups, bucket_region=bucket_region)
    if not out.blocked:
        return out
    if len(out.blocked) == len(where.subnets):
        subnet, found = next(iter(out.blocked.items()))
        which = subnet if where.given else f"the default VPC's subnets ({len(out.blocked)}), e.g. {subnet}"
        refusal = (
            f"{which}: once booted the SSM agent could not register, whatever the image: {'; '.join(found)}"
        )
        if refuse:
            raise UsageError(refusal + "; --skip-network-check if a path exists that this cannot see")
        out.warnings.append(f"{refusal}; going on (--skip-network-check)")
        return out
    out.warnings += [
        f"{subnet}: {'; '.join(found)}; RunInstances may pick it: give --subnet"
        for subnet, found in out.blocked.items()
    ]
    return out


def _policies(endpoints: list[dict[str, Any]], targets: list[Destination]) -> list[str]:
    """The endpoints on the path, whose policies may refuse the calls (their content is not judged)."""
    used = [t.endpoint for t in targets if t.endpoint]
    if not any(t.endpoint and t.service.endswith(".s3") for t in targets):
        used += [
            e
            for e in endpoints
            if e.get("VpcEndpointType") == "Gateway" and ".s3" in str(e.get("ServiceName"))
        ]
    return [f"the policy of endpoint {e['VpcEndpointId']} ({e.get('ServiceName', '?')})" for e in used]


def _user_groups(
    ec2: Any, groups: tuple[str, ...], targets: list[Destination], custom: list[str], out: Judged
) -> list[str]:
    """``--security-group``'s egress: HTTPS to every destination, DNS to every custom server."""
    described = paginate(ec2, "describe_security_groups", "SecurityGroups", GroupIds=list(groups))
    rules = [r for g in described for r in g.get("IpPermissionsEgress", [])]
    named = f"--security-group {', '.join(groups)}"
    flows = [
        (Flow("tcp", (443, 443), cidr, f"tcp/443 to {t.label}"), t.groups)
        for t in targets
        for cidr in t.cidrs
    ]
    flows += [(Flow("udp", (53, 53), f"{s}/32", f"udp/53 to DNS server {s}"), ()) for s in custom]
    return _verdicts(
        out, named, [(flow, firewall.security_groups(rules, flow, peers)) for flow, peers in flows]
    )


class _Acls:
    """Each subnet's network ACL, described once."""

    def __init__(self, ec2: Any) -> None:
        self.ec2 = ec2
        self.known: dict[str, dict[str, Any] | None] = {}

    def of(self, subnet_id: str) -> dict[str, Any] | None:
        if subnet_id not in self.known:
            found = paginate(
                self.ec2,
                "describe_network_acls",
                "NetworkAcls",
                Filters=[{"Name": "association.subnet-id", "Values": [subnet_id]}],
            )
            self.known[subnet_id] = dict(found[0]) if found else None
        return self.known[subnet_id]


def _launch_acl(
    acls: _Acls, subnet: dict[str, Any], targets: list[Destination], custom: list[str], out: Judged
) -> list[str]:
    """The launch subnet's network ACL: out to each destination and DNS server, in their replies."""
    sid, own = str(subnet["SubnetId"]), str(subnet["CidrBlock"])
    acl = acls.of(sid)
    if acl is None:
        out.not_judged.append(f"the network ACL of {sid} (none found)")
        return []
    outward = [(t.label, cidr, "tcp", 443) for t in targets for cidr in t.cidrs if _crosses(own, cidr)]
    outward += [(f"DNS server {s}", f"{s}/32", "udp", 53) for s in custom if _crosses(own, f"{s}/32")]
    checks = []
    for label, cidr, protocol, port in outward:
        checks.append(
            _acl_check(acl, protocol, (port, port), cidr, f"{protocol}/{port} to {label}", egress=True)
        )
        replies = f"its replies from {label} to ports {EPHEMERAL[0]}-{EPHEMERAL[1]}"
        checks.append(_acl_check(acl, protocol, EPHEMERAL, cidr, replies, egress=False))
    return _verdicts(out, sid, checks)


def _endpoint_groups(ec2: Any, targets: list[Destination]) -> dict[str, dict[str, Any]]:
    ids = sorted({g for t in targets for g in t.groups})
    if not ids:
        return {}
    found = paginate(ec2, "describe_security_groups", "SecurityGroups", GroupIds=ids)
    return {str(g["GroupId"]): g for g in found}


def _endpoints(
    acls: _Acls,
    groups_of: dict[str, dict[str, Any]],
    subnet: dict[str, Any],
    targets: list[Destination],
    groups: tuple[str, ...],
    out: Judged,
) -> list[str]:
    """Each interface endpoint on the path takes tcp/443 from the launch subnet: its groups' ingress,
    its subnets' network ACLs."""
    own = str(subnet["CidrBlock"])
    found: list[str] = []
    for target in targets:
        endpoint = target.endpoint
        if endpoint is None:
            continue
        eid = str(endpoint["VpcEndpointId"])
        rules = [r for g in target.groups for r in groups_of.get(g, {}).get("IpPermissions", [])]
        flow = Flow("tcp", (443, 443), own, f"tcp/443 from {subnet['SubnetId']} ({own})")
        named = (
            f"the security groups {', '.join(target.groups) or '(none)'} of endpoint {eid} ({target.service})"
        )
        found += _verdicts(out, named, [(flow, firewall.security_groups(rules, flow, groups))])
        for endpoint_subnet in endpoint.get("SubnetIds", []):
            if endpoint_subnet == subnet["SubnetId"]:
                continue  # a network ACL filters only what enters or leaves the subnet
            acl = acls.of(str(endpoint_subnet))
            if acl is None:
                out.not_judged.append(f"the network ACL of {endpoint_subnet} (none found)")
                continue
            checks = [
                _acl_check(acl, "tcp", (443, 443), own, f"tcp/443 from {own} to {eid}", egress=False),
                _acl_check(
                    acl, "tcp", EPHEMERAL, own, f"endpoint {eid}'s replies to {own} ports "
                    f"{EPHEMERAL[0]}-{EPHEMERAL[1]}", egress=True,
                ),
            ]  # fmt: skip
            found += _verdicts(out, f"{endpoint_subnet} (endpoint {eid})", checks)
    return found


def _acl_check(
    acl: dict[str, Any], protocol: str, ports: tuple[int, int], cidr: str, what: str, *, egress: bool
) -> tuple[Flow, firewall.Decision]:
    flow = Flow(protocol, ports, cidr, what)
    return flow, firewall.network_acl(acl, flow, egress=egress)


def _verdicts(out: Judged, who: str, checks: list[tuple[Flow, firewall.Decision]]) -> list[str]:
    """Sort the decisions: refusals returned, passes and the undecided recorded in ``out``."""
    refused: list[str] = []
    for flow, decision in checks:
        if decision.allowed is True:
            out.judged.append(f"{who}: {flow.what}")
        elif decision.allowed is None:
            out.not_judged.append(f"{who}: {decision.why}")
        else:
            refused.append(f"{who}: {decision.why}")
    return refused


def _crosses(subnet_cidr: str, cidr: str) -> bool:
    """Whether traffic from the subnet to ``cidr`` leaves the subnet (and meets its network ACL)."""
    inner = ipaddress.IPv4Network(cidr, strict=False)
    return not inner.subnet_of(ipaddress.IPv4Network(subnet_cidr, strict=False))
