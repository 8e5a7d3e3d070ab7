"""Rule packs: YAML files of rules, validated against a schema composed from the check kinds."""

from imagelint.rulepacks.loader import builtin_pack_paths, load_packs
from imagelint.rulepacks.model import CheckSpec, Rule, RulePack, RuleStatus, Scope, Severity

__all__ = [
    "CheckSpec",
    "Rule",
    "RulePack",
    "RuleStatus",
    "Scope",
    "Severity",
    "builtin_pack_paths",
    "load_packs",
]
