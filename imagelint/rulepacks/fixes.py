"""The machine-applicable fixes a rule may declare (``fix:``): the action types, their parameters and
their JSON Schema.

A fix is data: a list of typed actions, never a command. Each action names what it does to the
image (disable a unit, empty a file...), and its arguments are plain strings that the remedy layer
quotes for the shell or uses as paths inside the image root; ``{path}`` and ``{unit}`` stand for the
finding's path and unit. ``manual`` marks what needs a person (a credential to rotate).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from imagelint.records import dataclass

PATH_TEMPLATE = r"^(/|\{path\})[^\x00]*$"  # an image path, or one built from the finding's path
UNIT_TEMPLATE = r"^(\{unit\}|[A-Za-z0-9:_.\\@-]+)$"
SSHD_KEYWORD = r"^[A-Za-z][A-Za-z0-9]{0,63}$"
SSHD_VALUE = r"^[A-Za-z0-9._,@:+/-]{1,128}$"  # no quotes, spaces or backslashes: one word
# a literal directory, then a name pattern of characters the shell neither splits nor expands but * and ?
MATCH_GLOB = r"^(/[^\x00/*?\[\]]+)+/[A-Za-z0-9._+*?-]{1,64}$"
USER_NAME = r"^[a-z_][a-z0-9_-]{0,31}$"

_PATH = {"type": "string", "pattern": PATH_TEMPLATE, "maxLength": 4096, "default": "{path}"}
_UNIT = {"type": "string", "pattern": UNIT_TEMPLATE, "maxLength": 256, "default": "{unit}"}

# action -> (description, properties, required)
ACTIONS: dict[str, tuple[str, dict[str, Any], tuple[str, ...]]] = {
    "disable-unit": (
        "what `systemctl --root=ROOT disable UNIT` does: remove the enablement links of the unit, its "
        "aliases and its Also= units from /etc/systemd/system",
        {"unit": _UNIT},
        (),
    ),
    "mask-unit": (
        "what `systemctl --root=ROOT mask UNIT` does: link /etc/systemd/system/UNIT to /dev/null",
        {"unit": _UNIT},
        (),
    ),
    "remove-matching": (
        "remove the entries of GLOB's directory whose names match its last component (* and ?; a "
        "leading dot only matched by a pattern that starts with one), as `rm -rf -- DIR/PATTERN` "
        "does; the directory stays. It applies to the finding whose path is that directory",
        {"glob": {"type": "string", "pattern": MATCH_GLOB, "maxLength": 4096}},
        ("glob",),
    ),
    "lock-password": (
        "what `passwd --root=ROOT -l USER` does: a `!` put before USER's password hash in /etc/shadow "
        "(nothing when it is locked already)",
        {"user": {"type": "string", "pattern": USER_NAME, "default": "root"}},
        (),
    ),
    "empty-file": ("truncate an existing regular file to zero bytes", {"path": _PATH}, ()),
    "remove-path": ("remove a file, link or directory tree (nothing when it is absent)", {"path": _PATH}, ()),
    "symlink": (
        "make PATH a symbolic link to TARGET (replacing what is there)",
        {"path": _PATH, "target": {"type": "string", "pattern": "^/[^\\x00]*$", "maxLength": 4096}},
        ("target",),
    ),
    "chmod": (
        "clear permission bits of a file or directory (never through a link)",
        {"path": _PATH, "clear": {"type": "string", "pattern": "^0?[0-7]{3,4}$"}},
        ("clear",),
    ),
    "set-sshd-option": (
        "make sshd's first value of OPTION be VALUE: a line at the top of /etc/ssh/sshd_config, unless "
        "the file's leading directives already set it so",
        {
            "option": {"type": "string", "pattern": SSHD_KEYWORD},
            "value": {"type": "string", "pattern": SSHD_VALUE},
        },
        ("option", "value"),
    ),
    "manual": (
        "what needs a person (say what): listed as not fixable automatically, with this reason",
        {"reason": {"type": "string", "minLength": 1, "maxLength": 500}},
        ("reason",),
    ),
}


@dataclass(frozen=True)
class FixAction:
    """One declared action: its type and its arguments as the pack wrote them (defaults filled in)."""

    action: str
    args: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, key: str) -> str:
        return self.args[key]


def fix_schema() -> dict[str, Any]:
    """``$defs`` entry ``fix``: a list of actions, each an object with ``action`` and its parameters."""
    cases = [
        {
            "if": {"properties": {"action": {"const": name}}},
            "then": {
                "type": "object",
                "description": description,
                "additionalProperties": False,
                "required": ["action", *required],
                "properties": {"action": {"const": name}, **properties},
            },
        }
        for name, (description, properties, required) in ACTIONS.items()
    ]
    return {
        "type": "array",
        "minItems": 1,
        "description": "machine-applicable remediation (imagelint fix): typed actions, never commands",
        "items": {
            "type": "object",
            "required": ["action"],
            "properties": {"action": {"enum": list(ACTIONS)}},
            "allOf": cases,
        },
    }


def with_defaults(raw: dict[str, Any]) -> FixAction:
    """A validated action dict as a FixAction, with every parameter's default filled in."""
    _, properties, _ = ACTIONS[raw["action"]]
    args = {k: str(raw.get(k, spec.get("default", ""))) for k, spec in properties.items()}
    return FixAction(raw["action"], {k: v for k, v in args.items() if v != ""})
