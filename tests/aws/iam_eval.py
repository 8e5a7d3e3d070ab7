"""A small IAM evaluator for the tests: is a request (action, resource ARN, condition context) allowed
by a statement of a policy? Only what the printed policies use: ``*``/``?`` wildcards per ARN segment,
the condition operators StringEquals, StringLike, ArnEquals, ArnLike, Null, Bool and
ForAllValues:StringEquals, policy variables (``${ec2:SourceInstanceARN}``) in condition values, and
the context keys a request carries (request tag keys, the resource's tags and owner as moto has them
at the call, the SSM document, the S3 bucket and key, the role, the permissions boundary and policy
ARN of IAM calls)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any

ACCOUNT = "123456789012"  # moto's
REGION = "us-east-1"


@dataclass(frozen=True)
class Request:
    action: str
    resource: str
    context: dict[str, Any] = field(default_factory=dict)  # condition key → value (a list: multivalued)


def _arn_match(pattern: str, arn: str) -> bool:
    if pattern == "*":
        return True
    parts, wanted = pattern.split(":", 5), arn.split(":", 5)
    return len(parts) == len(wanted) == 6 and all(map(fnmatch.fnmatchcase, wanted, parts))


def _values(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


_VARIABLE = re.compile(r"\$\{([^}]+)\}")


def _substituted(wanted: Any, context: dict[str, Any]) -> list[str] | None:
    """The condition's values with their policy variables replaced from the request's context; a
    variable the request does not carry makes the value match nothing (None when none is left)."""
    out = []
    for value in _values(wanted):
        names = _VARIABLE.findall(value)
        if any(name not in context for name in names):
            continue
        out.append(_VARIABLE.sub(lambda m: str(context[m.group(1)]), value))
    return out or None


def _condition(operator: str, key: str, wanted: Any, context: dict[str, Any]) -> bool:
    if operator == "ForAllValues:StringEquals":  # every value of the key is one of the wanted
        return all(v in _values(wanted) for v in _values(context.get(key, [])))
    if operator == "Null":  # "true": the key is absent; "false": present
        return (key not in context) == (str(wanted).lower() == "true")
    if key not in context:
        return False
    value = str(context[key])
    wanted = _substituted(wanted, context)
    if wanted is None:
        return False
    if operator in ("StringEquals", "ArnEquals"):
        return value in wanted
    if operator == "StringLike":
        return any(fnmatch.fnmatchcase(value, w) for w in wanted)
    if operator == "ArnLike":
        return any(_arn_match(w, value) for w in wanted)
    if operator == "Bool":
        return value.lower() in [w.lower() for w in _values(wanted)]
    raise AssertionError(f"the evaluator does not know {operator}")


def allows(statement: dict[str, Any], request: Request) -> bool:
    actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
    resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
    return (
        any(fnmatch.fnmatchcase(request.action.lower(), a.lower()) for a in actions)
        and any(_arn_match(r, request.resource) for r in resources)
        and all(
            _condition(operator, key, wanted, request.context)
            for operator, test in statement.get("Condition", {}).items()
            for key, wanted in test.items()
        )
    )


def allowed_by(policy: dict[str, Any], request: Request) -> list[str]:
    """The Sids of the statements that allow ``request``."""
    return [s.get("Sid", str(i)) for i, s in enumerate(policy["Statement"]) if allows(s, request)]


def resource_facts(ec2: Any, ids: list[str]) -> dict[str, dict[str, Any]]:
    """Owner and tags of EC2 images, snapshots and instances as they are now (at the call)."""
    out: dict[str, dict[str, Any]] = {}
    for rid in ids:
        if rid.startswith("ami-"):
            found = ec2.describe_images(ImageIds=[rid]).get("Images", [])
        elif rid.startswith("snap-"):
            found = ec2.describe_snapshots(SnapshotIds=[rid]).get("Snapshots", [])
        else:
            found = [
                i for r in ec2.describe_instances(InstanceIds=[rid])["Reservations"] for i in r["Instances"]
            ]
        if found:
            tags = {t["Key"]: t["Value"] for t in found[0].get("Tags", [])}
            out[rid] = {"owner": found[0].get("OwnerId", ACCOUNT), "tags": tags}
    return out


def _ec2_arn(rid: str) -> str:
    kind = {"ami-": "image", "snap-": "snapshot", "i-": "instance"}[rid[: rid.index("-") + 1]]
    account = ACCOUNT if kind == "instance" else ""  # images and snapshots have no account in their ARN
    return f"arn:aws:ec2:{REGION}:{account}:{kind}/{rid}"


def _ec2_context(facts: dict[str, Any], tag_prefix: str = "aws:ResourceTag/") -> dict[str, Any]:
    context: dict[str, Any] = {f"{tag_prefix}{k}": v for k, v in facts.get("tags", {}).items()}
    context["ec2:Owner"] = facts.get("owner", "")
    return context


# The calls whose resources the policies scope: their IDs whose owner and tags are looked up at the call
LOOKED_UP = {
    "ssm:SendCommand": "InstanceIds",
    "ec2:DeregisterImage": "ImageId",
    "ec2:DeleteSnapshot": "SnapshotId",
    "ec2:EnableImageDeprecation": "ImageId",
    "ec2:CreateTags": "Resources",
    "ec2:CreateVolume": "SnapshotId",
}


def requests_of(api: str, params: dict[str, Any], facts: dict[str, dict[str, Any]]) -> list[Request]:
    """The authorisation requests IAM evaluates for one API call (only the scoped ones; [] else)."""
    if api == "ssm:SendCommand":
        document = f"arn:aws:ssm:{REGION}::document/{params['DocumentName']}"
        return [Request(api, document)] + [
            Request(api, _ec2_arn(i), _ec2_context(facts.get(i, {}), "ssm:resourceTag/"))
            for i in params.get("InstanceIds", [])
        ]
    if api in ("ec2:DeregisterImage", "ec2:EnableImageDeprecation", "ec2:DeleteSnapshot"):
        rid = params[LOOKED_UP[api]]
        return [Request(api, _ec2_arn(rid), _ec2_context(facts.get(rid, {})))]
    if api == "ec2:CreateTags" and all(r.startswith(("ami-", "snap-")) for r in params["Resources"]):
        keys = [t["Key"] for t in params["Tags"]]
        return [
            Request(api, _ec2_arn(r), {**_ec2_context(facts.get(r, {})), "aws:TagKeys": keys})
            for r in params["Resources"]
        ]
    if api in ("s3:PutObject", "s3:GetObject", "s3:HeadObject"):
        action = "s3:GetObject" if api == "s3:HeadObject" else api
        return [Request(action, f"arn:aws:s3:::{params['Bucket']}/{params['Key']}")]
    if api in ("s3:HeadBucket", "s3:ListObjects", "s3:ListObjectsV2"):
        return [Request("s3:ListBucket", f"arn:aws:s3:::{params['Bucket']}")]
    if api == "sts:AssumeRole":
        return [Request(api, params["RoleArn"])]
    if api in ("iam:CreateRole", "iam:CreateInstanceProfile"):
        kind, name = ("role", params["RoleName"]) if api == "iam:CreateRole" else ("instance-profile", None)
        name = name or params["InstanceProfileName"]
        arn = f"arn:aws:iam::{ACCOUNT}:{kind}{params.get('Path', '/')}{name}"
        context = _request_tags(params.get("Tags", []))
        if "PermissionsBoundary" in params:
            context["iam:PermissionsBoundary"] = params["PermissionsBoundary"]
        tagging = "iam:TagRole" if kind == "role" else "iam:TagInstanceProfile"
        return [Request(api, arn, context)] + ([Request(tagging, arn, context)] if params.get("Tags") else [])
    if api == "ec2:CreateVolume":  # the snapshot it is made from, and the volume with its request tags
        tags = [t for spec in params.get("TagSpecifications", []) for t in spec["Tags"]]
        volume = f"arn:aws:ec2:{REGION}:{ACCOUNT}:volume/*"
        snapshot = params.get("SnapshotId")
        made = [Request(api, volume, _request_tags(tags))]
        return made + (
            [Request(api, _ec2_arn(snapshot), _ec2_context(facts.get(snapshot, {})))] if snapshot else []
        )
    return []


def _request_tags(tags: list[dict[str, str]]) -> dict[str, Any]:
    context: dict[str, Any] = {f"aws:RequestTag/{t['Key']}": t["Value"] for t in tags}
    context["aws:TagKeys"] = [t["Key"] for t in tags]
    return context
