"""Rule packs: YAML files of rules, validated against a schema composed from the check kinds.

The names below are imported from their modules on first use (:mod:`imagelint.lazy`): importing
``imagelint.rulepacks.model`` for ``Severity`` does not load the YAML loader and every check kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagelint import lazy

if TYPE_CHECKING:
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
__getattr__ = lazy.exports(
    __name__,
    {
        "loader": ("builtin_pack_paths", "load_packs"),
        "model": ("CheckSpec", "Rule", "RulePack", "RuleStatus", "Scope", "Severity"),
    },
)
