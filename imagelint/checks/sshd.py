"""Check kind on sshd's effective global configuration."""

from __future__ import annotations

from typing import Annotated

from imagelint.checks import register
from imagelint.checks.base import CheckContext, CheckKind, NotApplicable, Observation, PathNeed
from imagelint.checks.params import Param
from imagelint.facts.sshd import SSHD_CONFIG, read_sshd_config
from imagelint.records import dataclass


@dataclass(frozen=True, kw_only=True)
class SshdOptionParams:
    option: Annotated[str, Param("sshd_config keyword (case-insensitive)")]
    values: Annotated[tuple[str, ...], Param("values that fire (case-insensitive)", minItems=1)]
    default: Annotated[str, Param("sshd's built-in value when the option is not set")]
    config: Annotated[str, Param("the main sshd configuration file in the image", pattern="^/")] = SSHD_CONFIG


@register
class SshdOption(CheckKind[SshdOptionParams]):
    name = "sshd.option"
    summary = "Fires when sshd's effective value of an option is one of the given values; n/a without sshd."
    parameters = SshdOptionParams
    variables = {"option": "the keyword", "value": "its effective value", "source": "file:line, or 'default'"}

    def paths(self, params: SshdOptionParams) -> list[PathNeed]:
        return [PathNeed(params.config, "sshd")]

    def evaluate(self, ctx: CheckContext, params: SshdOptionParams) -> list[Observation]:
        path = params.config
        config = ctx.fact(("sshd", path), lambda: read_sshd_config(ctx.target, path))
        if config is None:
            raise NotApplicable(f"{path} does not exist (sshd is not installed)")
        for where, offset in config.undecodable:
            ctx.warn_undecodable(where, offset)
        setting = config.get(params.option)
        value = setting.value if setting else params.default
        if value.lower() not in {v.lower() for v in params.values}:
            return []
        where = setting.path if setting else path
        source = f"{setting.path}:{setting.line}" if setting else "default"
        evidence = {"option": params.option, "value": value, "source": source}
        return [
            Observation(
                f"{path}:{params.option}",
                path=where,
                line=setting.line if setting else None,
                evidence=evidence,
            )
        ]
