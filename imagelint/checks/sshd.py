"""Check kind on sshd's effective global configuration."""

from __future__ import annotations

from typing import Any

from imagelint.checks import register
from imagelint.checks.base import CheckContext, CheckKind, NotApplicable, Observation, PathNeed
from imagelint.checks.params import strings
from imagelint.facts.sshd import SSHD_CONFIG, read_sshd_config


@register
class SshdOption(CheckKind):
    name = "sshd.option"
    summary = "Fires when sshd's effective value of an option is one of the given values; n/a without sshd."
    parameters = {
        "option": {"type": "string", "description": "sshd_config keyword (case-insensitive)"},
        "values": strings("values that fire (case-insensitive)", minItems=1),
        "default": {"type": "string", "description": "sshd's built-in value when the option is not set"},
        "config": {"type": "string", "pattern": "^/", "default": SSHD_CONFIG},
    }
    required = ("option", "values", "default")
    variables = {"option": "the keyword", "value": "its effective value", "source": "file:line, or 'default'"}

    def paths(self, params: dict[str, Any]) -> list[PathNeed]:
        return [PathNeed(params.get("config", SSHD_CONFIG), "sshd")]

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        path = params.get("config", SSHD_CONFIG)
        config = ctx.fact(("sshd", path), lambda: read_sshd_config(ctx.target, path))
        if config is None:
            raise NotApplicable(f"{path} does not exist (sshd is not installed)")
        for where, offset in config.undecodable:
            ctx.warn_undecodable(where, offset)
        setting = config.get(params["option"])
        value = setting.value if setting else params["default"]
        if value.lower() not in {v.lower() for v in params["values"]}:
            return []
        where = setting.path if setting else path
        source = f"{setting.path}:{setting.line}" if setting else "default"
        evidence = {"option": params["option"], "value": value, "source": source}
        return [
            Observation(
                f"{path}:{params['option']}",
                path=where,
                line=setting.line if setting else None,
                evidence=evidence,
            )
        ]
