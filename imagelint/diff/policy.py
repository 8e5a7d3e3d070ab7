"""The config's ``diff:`` section: what each kind of change does to ``imagelint diff``'s exit code.

Each kind is ``fail`` (exit 1 when NEW brings one in), ``warn`` (listed as a warning, exit
unchanged), ``note`` (listed as news, not as a warning: an improvement such as a resolved finding) or
``ignore`` (not listed). ``allow-units`` lists unit-name globs that may appear (as new boot units or
new unit files) without failing: such a change is listed as ``allowed``.

```yaml
diff:
  new-boot-units: fail
  restart-policy: warn
  packages: ignore
  allow-units: [node-exporter.service, "my-agent-*.service"]
```
"""

from __future__ import annotations

import fnmatch
from dataclasses import field
from typing import Any

from imagelint.records import dataclass

# kind -> (what it is, default action)
KINDS: dict[str, tuple[str, str]] = {
    "new-boot-units": ("units newly started at boot (with the chain that starts them)", "fail"),
    "removed-boot-units": ("units no longer started at boot", "warn"),
    "unit-files": ("unit files added or removed that nothing starts at boot", "warn"),
    "enablement": ("enablement state changes (systemctl is-enabled)", "warn"),
    "preset": ("preset verdict changes", "warn"),
    "restart-policy": (
        "Restart=, RestartSec= or start-limit changes (e.g. a limit that can no longer trip)",
        "warn",
    ),
    "executables": ("executables a unit runs that appeared or vanished", "warn"),
    "dropins": ("drop-ins added, changed or removed", "warn"),
    "default-target": ("the default target changed", "warn"),
    "packages": ("packages added, removed or at another version", "warn"),
    "image": ("os-release or kernel command line changes", "warn"),
    "new-findings": ("findings NEW has and OLD lacks (failing ones take this action, others warn)", "fail"),
    "resolved-findings": ("findings OLD had and NEW lacks (an improvement: listed as a note)", "note"),
    "volumes": ("a diff of two AMIs: an EBS volume (by device name) only one of them maps", "warn"),
}
ACTIONS = ("fail", "warn", "note", "ignore")
ALLOWABLE = ("new-boot-units", "unit-files")  # the kinds by which a unit "appears"


def diff_schema_section() -> dict[str, Any]:
    """The JSON Schema of the config's ``diff:`` mapping."""
    properties: dict[str, Any] = {
        kind: {"enum": list(ACTIONS), "default": default, "description": what}
        for kind, (what, default) in KINDS.items()
    }
    properties["allow-units"] = {
        "type": "array",
        "items": {"type": "string", "minLength": 1},
        "description": "unit-name globs that may appear (new boot units, new unit files) without failing",
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
        "description": "imagelint diff: which kinds of change fail, warn or are ignored",
    }


@dataclass
class DiffPolicy:
    actions: dict[str, str] = field(default_factory=lambda: {k: d for k, (_, d) in KINDS.items()})
    allow_units: list[str] = field(default_factory=list)

    @classmethod
    def from_config(cls, data: dict[str, Any] | None) -> DiffPolicy:
        policy = cls()
        for key, value in (data or {}).items():
            if key == "allow-units":
                policy.allow_units = list(value)
            elif key in KINDS:
                policy.actions[key] = value
        return policy

    def allowed(self, unit: str | None) -> bool:
        return unit is not None and any(fnmatch.fnmatchcase(unit, g) for g in self.allow_units)
