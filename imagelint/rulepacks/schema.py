"""JSON Schema of a rule pack, composed from the base rule shape and every check kind's parameters."""

from __future__ import annotations

from functools import cache
from typing import Any

from imagelint.checks import registry
from imagelint.rulepacks.fixes import fix_schema
from imagelint.rulepacks.model import RuleStatus, Scope, Severity

RULE_ID = "^[A-Z][A-Z0-9]*[0-9]{3}$"  # ≡ [0-9]{3,}$ but linear for a backtracking matcher
RULE_NAME = "^[a-z0-9]+(-[a-z0-9]+)*$"


def check_defs() -> dict[str, Any]:
    """``$defs`` entries: one per kind, plus ``check`` which dispatches on ``kind``."""
    kinds = registry()
    conditions = {
        "when": {
            "$ref": "#/$defs/conditions",
            "description": "all must hold, else the rule is not applicable",
        },
        "unless": {"$ref": "#/$defs/conditions", "description": "if any holds, the rule passes"},
    }
    defs: dict[str, Any] = {
        "conditions": {
            "oneOf": [
                {"$ref": "#/$defs/check"},
                {"type": "array", "items": {"$ref": "#/$defs/check"}, "minItems": 1},
            ]
        },
        "check": {
            "type": "object",
            "required": ["kind"],
            "properties": {"kind": {"enum": sorted(kinds)}},
            "allOf": [
                {"if": {"properties": {"kind": {"const": name}}}, "then": {"$ref": f"#/$defs/kind:{name}"}}
                for name in sorted(kinds)
            ],
        },
    }
    for name, kind in sorted(kinds.items()):
        schema = kind.schema()
        schema["properties"] = {**schema["properties"], **conditions}
        schema["additionalProperties"] = False
        schema["description"] = kind.summary
        defs[f"kind:{name}"] = schema
    return defs


EXAMPLE_ENTRY: dict[str, Any] = {
    "description": "file content, or an object for a mode, a symlink or a directory",
    "oneOf": [
        {"type": "string"},
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "content": {"type": "string"},
                "mode": {"type": "string", "pattern": "^0?[0-7]{3,4}$"},
                "link": {"type": "string"},
                "directory": {"const": True},
            },
        },
    ],
}


def _tree(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "propertyNames": {"pattern": "^/"},
        "additionalProperties": {"$ref": "#/$defs/example_entry"},
    }


def rule_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["id", "name", "title", "severity", "scope", "check", "message", "remediation"],
        "properties": {
            "id": {"type": "string", "pattern": RULE_ID, "description": "stable id, never reused"},
            "name": {"type": "string", "pattern": RULE_NAME},
            "title": {"type": "string", "minLength": 1},
            "description": {"type": "string", "description": "why this matters (rationale)"},
            "severity": {"enum": [s.value for s in Severity]},
            "scope": {
                "type": "array",
                "items": {"enum": [s.value for s in Scope]},
                "minItems": 1,
                "uniqueItems": True,
            },
            "check": {"$ref": "#/$defs/check"},
            "message": {"type": "string", "minLength": 1, "description": "template: {path}, {unit}, ..."},
            "remediation": {"type": "string", "minLength": 1},
            "fix": {"$ref": "#/$defs/fix"},
            "references": {"type": "array", "items": {"type": "string"}},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z0-9-]+$"}},
            "example": _tree("a tree on which the rule fires (image path → entry), for docs and tests"),
            "negative_example": _tree("a tree near the example on which the rule must stay quiet"),
            "status": {
                "enum": [s.value for s in RuleStatus],
                "default": "stable",
                "description": "stable; preview (runs only when selected by id or name); deprecated (runs, "
                "with a warning); removed (kept so the id is never reused; never runs)",
            },
            "since": {"type": "string", "pattern": r"^\d+\.\d+\.\d+$", "description": "first version"},
            "renamed_from": {
                "type": "array",
                "items": {"type": "string", "pattern": RULE_NAME},
                "description": "earlier names: selectors and waivers that use them still match",
            },
            "replaces": {
                "type": "array",
                "items": {"type": "string", "pattern": RULE_ID},
                "description": "ids of removed rules whose selectors and waivers this rule takes over",
            },
            "replaced_by": {
                "type": "string",
                "pattern": RULE_ID,
                "description": "for a deprecated or removed rule: the rule to use instead",
            },
            "subsumes": {
                "type": "array",
                "items": {"type": "string", "pattern": RULE_ID},
                "uniqueItems": True,
                "description": "ids of rules that each report one piece of this rule's evidence: where a "
                "failing finding of this rule names a unit, their findings on that unit are folded into it "
                "(listed, marked part_of, not failing on their own)",
            },
        },
    }


def rules_schema() -> dict[str, Any]:
    """The schema `imagelint schema rules` prints and every pack is validated against, composed from
    the check kinds registered now (a kind registered later, by a plug-in, is in the next one)."""
    return _rules_schema(tuple(sorted(registry())))


@cache
def _rules_schema(kinds: tuple[str, ...]) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://imagelint.dev/schemas/rules-v1.json",
        "title": "imagelint rule pack",
        "type": "object",
        "additionalProperties": False,
        "required": ["rules"],
        "properties": {
            "pack": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "pattern": RULE_NAME},
                    "description": {"type": "string"},
                },
            },
            "rules": {"type": "array", "items": {"$ref": "#/$defs/rule"}},
        },
        "$defs": {"rule": rule_schema(), "example_entry": EXAMPLE_ENTRY, "fix": fix_schema(), **check_defs()},
    }
