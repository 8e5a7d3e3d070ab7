"""The report: one object that every output format renders.

The names below are imported from :mod:`imagelint.report.model` on first use (:mod:`imagelint.lazy`),
so that importing a submodule (``imagelint.report.escape``) does not load the model and the rule packs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagelint import lazy

if TYPE_CHECKING:
    from imagelint.report.model import (
        Finding,
        Outcome,
        Report,
        ReportError,
        RuleResult,
        Verdict,
        report_from_dict,
    )

__all__ = ["Finding", "Outcome", "Report", "ReportError", "RuleResult", "Verdict", "report_from_dict"]
__getattr__ = lazy.exports(__name__, {"model": tuple(__all__)})
