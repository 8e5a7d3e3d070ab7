"""Which DNS servers an instance in a VPC will ask, read before launch (``DescribeVpcs``,
``DescribeVpcAttribute``, ``DescribeDhcpOptions``), and whether they can answer at all.

The SSM agent finds ``ssm``/``ssmmessages``/``ec2messages`` by name: without a DNS server that
answers, it never registers, and a run that did not look would end blaming the image. What the
instance asks is its VPC's DHCP options set's ``domain-name-servers``:

- ``AmazonProvidedDNS`` is the Route 53 Resolver, at the VPC's primary IPv4 CIDR base plus two and at
  ``169.254.169.253`` (Amazon VPC User Guide, "Amazon DNS server"). It answers only while the VPC's
  ``enableDnsSupport`` is on (botocore's model of ``ModifyVpcAttribute``: "If enabled, queries to the
  Amazon provided DNS server at the 169.254.169.253 IP address, or the reserved IP address at the
  base of the VPC network range "plus two" succeed"). Security groups and network ACLs do not filter
  it (Amazon VPC User Guide, "Internetwork traffic privacy in Amazon VPC": they "don't filter traffic
  to or from link-local addresses (169.254.0.0/16) or AWS reserved IPv4 addresses (...) including the
  Amazon DNS server address for the VPC"), so it needs no rule of ours.
- other addresses are the account's own servers: port 53, filtered like any other traffic, so the
  run's security group allows UDP and TCP 53 to each (:mod:`imagelint.aws.run_group`) and the
  network ACLs are judged for them (:mod:`imagelint.aws.network_rules`).
- a VPC with no DHCP options set (``DhcpOptionsId`` ``default``): instances on the Nitro system ask
  ``169.254.169.253``, Xen-based ones get no DNS server at all (Amazon VPC User Guide, "DHCP option
  set concepts"); which of the two the instance type is, is not judged here (it is named).

Interface endpoints' private DNS names live in a private hosted zone that only works with both
``enableDnsSupport`` and ``enableDnsHostnames`` on (botocore's model of ``CreateVpcEndpoint``'s
``PrivateDnsEnabled``), and only the Amazon resolver answers from it: custom servers must forward to
it, which cannot be seen from here (named, not judged).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from imagelint.aws.errors import call
from imagelint.records import dataclass

AMAZON_DNS = "AmazonProvidedDNS"
LINK_LOCAL_RESOLVER = "169.254.169.253"
NO_OPTIONS = "default"  # DescribeVpcs' DhcpOptionsId of a VPC without a DHCP options set


@dataclass(frozen=True)
class VpcDns:
    """A VPC's DNS settings as the instance will meet them."""

    vpc_id: str
    cidr: str  # the primary IPv4 CIDR (the Amazon resolver is its base plus two)
    cidrs: tuple[str, ...]  # every IPv4 CIDR of the VPC (a custom server inside one is routed locally)
    dhcp_options: str  # dopt-... or "default" (no DHCP options set)
    dns_support: bool
    dns_hostnames: bool
    servers: tuple[str, ...] = ()  # domain-name-servers as the options give them

    @property
    def amazon(self) -> bool:
        """The instance asks the Amazon resolver (AmazonProvidedDNS, or no options set at all)."""
        return self.dhcp_options == NO_OPTIONS or AMAZON_DNS in self.servers

    @property
    def custom(self) -> tuple[str, ...]:
        """The account's own DNS servers (IP addresses) the options name."""
        return tuple(s for s in self.servers if s != AMAZON_DNS and _address(s))

    @property
    def amazon_addresses(self) -> tuple[str, ...]:
        if not self.amazon:
            return ()
        if self.dhcp_options == NO_OPTIONS:
            return (LINK_LOCAL_RESOLVER,)
        base = ipaddress.ip_network(self.cidr, strict=False).network_address
        return (str(base + 2), LINK_LOCAL_RESOLVER)

    def resolvers(self) -> tuple[str, ...]:
        """Every address the instance may send its DNS queries to."""
        return (*self.custom, *self.amazon_addresses)

    def fact(self) -> dict[str, Any]:
        return {
            "vpc": self.vpc_id,
            "dhcp_options": self.dhcp_options,
            "domain_name_servers": list(self.servers),
            "enableDnsSupport": self.dns_support,
            "enableDnsHostnames": self.dns_hostnames,
            "resolvers": list(self.resolvers()),
        }


def read(ec2: Any, vpc_id: str) -> VpcDns:
    """The VPC's CIDRs, DNS attributes and DHCP options' ``domain-name-servers``."""
    vpc = call(ec2.describe_vpcs, VpcIds=[vpc_id])["Vpcs"][0]
    support = call(ec2.describe_vpc_attribute, VpcId=vpc_id, Attribute="enableDnsSupport")
    hostnames = call(ec2.describe_vpc_attribute, VpcId=vpc_id, Attribute="enableDnsHostnames")
    cidrs = [
        str(a["CidrBlock"])
        for a in vpc.get("CidrBlockAssociationSet", [])
        if a.get("CidrBlockState", {}).get("State", "associated") == "associated"
    ]
    options = str(vpc.get("DhcpOptionsId") or NO_OPTIONS)
    servers: list[str] = []
    if options != NO_OPTIONS:
        found = call(ec2.describe_dhcp_options, DhcpOptionsIds=[options])["DhcpOptions"]
        for config in found[0].get("DhcpConfigurations", []) if found else []:
            if config.get("Key") == "domain-name-servers":
                # one value may hold several, comma-separated, as the console writes them
                servers += [
                    s.strip()
                    for v in config.get("Values", [])
                    for s in str(v.get("Value", "")).split(",")
                    if s.strip()
                ]
    return VpcDns(
        vpc_id=vpc_id,
        cidr=str(vpc["CidrBlock"]),
        cidrs=tuple(cidrs or [str(vpc["CidrBlock"])]),
        dhcp_options=options,
        dns_support=bool(support["EnableDnsSupport"]["Value"]),
        dns_hostnames=bool(hostnames["EnableDnsHostnames"]["Value"]),
        servers=tuple(servers),
    )


def problems(dns: VpcDns, private_dns_endpoints: list[str]) -> list[str]:
    """What stops the instance from resolving the SSM endpoints' names; ``private_dns_endpoints``:
    the interface endpoints on its path whose private DNS names it needs."""
    found: list[str] = []
    if not dns.custom and not (dns.amazon and dns.dns_support):
        if dns.amazon:
            named = "it has no DHCP options set" if dns.dhcp_options == NO_OPTIONS else dns.dhcp_options
            found.append(
                f"{dns.vpc_id} has enableDnsSupport off, so the Amazon DNS server ({named}) answers "
                "nothing and the SSM agent cannot resolve the SSM endpoints (turn it on: aws ec2 "
                "modify-vpc-attribute --enable-dns-support)"
            )
        else:
            found.append(
                f"the DHCP options {dns.dhcp_options} of {dns.vpc_id} name no domain-name-servers, so "
                "the SSM agent cannot resolve the SSM endpoints"
            )
    off = [
        name
        for name, on in (("enableDnsSupport", dns.dns_support), ("enableDnsHostnames", dns.dns_hostnames))
        if not on
    ]
    if private_dns_endpoints and off:
        found.append(
            f"the interface endpoints {', '.join(private_dns_endpoints)} are reached by their private DNS "
            f"names, which need enableDnsSupport and enableDnsHostnames on, and {dns.vpc_id} has "
            f"{' and '.join(off)} off"
        )
    return found


def not_judged(dns: VpcDns, private_dns_endpoints: list[str]) -> list[str]:
    """What this cannot see about the instance's DNS, named for the report."""
    out: list[str] = []
    if dns.dhcp_options == NO_OPTIONS:
        out.append(
            f"{dns.vpc_id} has no DHCP options set: instance types on the Nitro system ask "
            f"{LINK_LOCAL_RESOLVER}, Xen-based ones get no DNS server"
        )
    if dns.custom and private_dns_endpoints:
        out.append(
            f"whether the DNS servers {', '.join(dns.custom)} forward the private DNS names of "
            f"{', '.join(private_dns_endpoints)} to the VPC's Amazon resolver"
        )
    for server in dns.custom:
        if not _inside(server, dns.cidrs):
            out.append(f"the route to DNS server {server}, outside {dns.vpc_id}")
    return out


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _inside(address: str, cidrs: tuple[str, ...]) -> bool:
    ip = _address(address)
    return ip is not None and any(ip in ipaddress.ip_network(c, strict=False) for c in cidrs)
