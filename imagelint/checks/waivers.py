"""Check kind on the run's own waivers: an expired waiver waives nothing and is reported."""

from __future__ import annotations

from typing import ClassVar

from imagelint.checks import register
from imagelint.checks.base import CheckContext, CheckKind, Observation
from imagelint.checks.params import NoParameters


@register
class WaiverExpired(CheckKind[NoParameters]):
    name = "config.waiver_expired"
    summary = "Fires for each waiver in the configuration whose expiry date has passed."
    parameters = NoParameters
    variables: ClassVar[dict[str, str]] = {
        "rule": "the waived rule",
        "expires": "expiry date",
        "owner": "owner",
        "source": "file:line",
    }

    def evaluate(self, ctx: CheckContext, params: NoParameters) -> list[Observation]:
        return [
            Observation(
                f"waiver:{w.source}",
                evidence={
                    "rule": w.rule,
                    "expires": w.expires.isoformat(),
                    "owner": w.owner or "-",
                    "source": w.source,
                },
            )
            for w in ctx.settings.waivers
            if w.expired(ctx.settings.today)
        ]
