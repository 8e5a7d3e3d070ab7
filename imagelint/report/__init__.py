"""The report: one object that every output format renders."""

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
