"""The packet-filter judgements (imagelint/aws/firewall.py) on rules as DescribeNetworkAcls and
DescribeSecurityGroups give them: a network ACL read in rule order, first match deciding, its final
``*`` deny; security groups' union of allow rules; a rule that covers only part of the far end
decides nothing (not judged)."""

from __future__ import annotations

from typing import Any

from imagelint.aws.firewall import EPHEMERAL, Flow, network_acl, security_groups

HTTPS_OUT = Flow("tcp", (443, 443), "0.0.0.0/0", "tcp/443 to ssm")
REPLIES = Flow("tcp", EPHEMERAL, "0.0.0.0/0", "replies")


def _entry(number: int, action: str, *, egress: bool, protocol: str = "-1", ports=None, cidr="0.0.0.0/0"):
    entry: dict[str, Any] = {
        "RuleNumber": number,
        "RuleAction": action,
        "Egress": egress,
        "Protocol": protocol,
        "CidrBlock": cidr,
    }
    if ports:
        entry["PortRange"] = {"From": ports[0], "To": ports[1]}
    return entry


def _acl(*entries: dict[str, Any]) -> dict[str, Any]:
    ends = [_entry(32767, "deny", egress=True), _entry(32767, "deny", egress=False)]
    return {"NetworkAclId": "acl-1", "Entries": [*entries, *ends]}


def test_the_default_acl_allows_everything() -> None:
    acl = _acl(_entry(100, "allow", egress=True), _entry(100, "allow", egress=False))
    assert network_acl(acl, HTTPS_OUT, egress=True).allowed is True
    assert network_acl(acl, REPLIES, egress=False).allowed is True


def test_the_lowest_rule_number_decides() -> None:
    acl = _acl(
        _entry(200, "allow", egress=True),
        _entry(90, "deny", egress=True, protocol="6", ports=(443, 443)),  # listed after, read first
    )
    decision = network_acl(acl, HTTPS_OUT, egress=True)
    assert decision.allowed is False and decision.why == "network ACL acl-1 rule 90 denies tcp/443 to ssm"


def test_without_an_allowing_rule_the_final_star_rule_denies() -> None:
    acl = _acl(_entry(100, "allow", egress=True, protocol="6", ports=(80, 80)))
    decision = network_acl(acl, HTTPS_OUT, egress=True)
    assert decision.allowed is False and decision.why == "network ACL acl-1 rule * denies tcp/443 to ssm"


def test_replies_need_every_ephemeral_port() -> None:
    # a Windows-style range (49152-65535) leaves Linux's 32768-49151 to the final deny
    windows = _acl(_entry(100, "allow", egress=False, protocol="6", ports=(49152, 65535)))
    assert network_acl(windows, REPLIES, egress=False).allowed is False
    split = _acl(
        _entry(100, "allow", egress=False, protocol="6", ports=(1024, 40000)),
        _entry(110, "allow", egress=False, protocol="6", ports=(40001, 65535)),
    )
    assert network_acl(split, REPLIES, egress=False).allowed is True
    # a deny inside the range, read before the wide allow
    holed = _acl(
        _entry(90, "deny", egress=False, protocol="6", ports=(50000, 50010)),
        _entry(100, "allow", egress=False, protocol="6", ports=(1024, 65535)),
    )
    assert network_acl(holed, REPLIES, egress=False).why.startswith("network ACL acl-1 rule 90 denies")


def test_udp_rules_do_not_answer_for_tcp_and_directions_stay_apart() -> None:
    acl = _acl(
        _entry(100, "allow", egress=True, protocol="17", ports=(443, 443)),
        _entry(110, "allow", egress=False, protocol="6", ports=(443, 443)),
    )
    assert network_acl(acl, HTTPS_OUT, egress=True).allowed is False


def test_a_rule_for_part_of_the_addresses_is_not_judged() -> None:
    acl = _acl(_entry(100, "allow", egress=True, protocol="6", ports=(443, 443), cidr="10.0.0.0/8"))
    decision = network_acl(acl, HTTPS_OUT, egress=True)
    assert decision.allowed is None
    assert decision.why == "network ACL acl-1 rule 100 (10.0.0.0/8) covers only part of tcp/443 to ssm"
    # ... but it decides for a far end inside it, and a disjoint one is not its business
    inside = Flow("tcp", (443, 443), "10.1.2.0/24", "tcp/443 to the endpoint")
    assert network_acl(acl, inside, egress=True).allowed is True
    outside = Flow("tcp", (443, 443), "192.168.0.0/24", "tcp/443 elsewhere")
    assert network_acl(acl, outside, egress=True).allowed is False


def _rule(protocol: str, ports: tuple[int, int] | None = None, **to: Any) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "IpProtocol": protocol,
        "IpRanges": [],
        "UserIdGroupPairs": [],
        "PrefixListIds": [],
    }
    if ports:
        rule |= {"FromPort": ports[0], "ToPort": ports[1]}
    return rule | to


def test_security_groups_any_rule_allows() -> None:
    everywhere = [{"CidrIp": "0.0.0.0/0"}]
    assert security_groups([_rule("-1", IpRanges=everywhere)], HTTPS_OUT).allowed is True
    assert security_groups([_rule("tcp", (0, 65535), IpRanges=everywhere)], HTTPS_OUT).allowed is True
    assert security_groups([_rule("6", (443, 443), IpRanges=everywhere)], HTTPS_OUT).allowed is True
    only_http = [_rule("tcp", (80, 80), IpRanges=everywhere), _rule("udp", (443, 443), IpRanges=everywhere)]
    decision = security_groups(only_http, HTTPS_OUT)
    assert decision.allowed is False and decision.why == "no rule allows tcp/443 to ssm"
    assert security_groups([], HTTPS_OUT).allowed is False  # a hardened account's bare group


def test_a_group_reference_reaches_the_interfaces_that_carry_it() -> None:
    to_endpoints = [_rule("tcp", (443, 443), UserIdGroupPairs=[{"GroupId": "sg-endpoints"}])]
    endpoint = Flow("tcp", (443, 443), "10.0.1.0/24", "tcp/443 to the endpoint")
    assert security_groups(to_endpoints, endpoint, ("sg-endpoints",)).allowed is True
    assert security_groups(to_endpoints, endpoint, ("sg-other",)).allowed is False


def test_prefix_lists_and_narrower_ranges_are_not_judged() -> None:
    s3_list = [_rule("tcp", (443, 443), PrefixListIds=[{"PrefixListId": "pl-63a5400a"}])]
    decision = security_groups(s3_list, HTTPS_OUT)
    assert (
        decision.allowed is None
        and decision.why == "rules allow tcp/443 to ssm only to prefix list pl-63a5400a"
    )
    narrow = [_rule("tcp", (443, 443), IpRanges=[{"CidrIp": "52.0.0.0/8"}])]
    assert security_groups(narrow, HTTPS_OUT).allowed is None
