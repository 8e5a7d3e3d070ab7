"""One side of ``imagelint diff``: a JSON report file, or an image audited now.

A regular file is read as a report (:mod:`imagelint.report.reading`: capped, schema-checked);
anything else is opened as a target through :func:`imagelint.targets.select.open_target` (the
same path ``audit`` takes) and audited with the run's rules and config, so that both sides carry
findings as well as an inventory. A report without an inventory (written before inventories
existed, or by a soak) cannot be compared: exit 3, naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from imagelint.diff.compare import Side
from imagelint.errors import TargetError

if TYPE_CHECKING:
    from imagelint.session import PreparedRun


def load_side(argument: Path, run: PreparedRun) -> Side:
    from imagelint.report.reading import looks_like_report

    if looks_like_report(argument):
        return _from_report(argument)
    from imagelint.session import evaluate
    from imagelint.targets.select import open_target

    report = evaluate(run, open_target(argument))
    if report.inventory is None:  # pragma: no cover - every image-scope audit has one
        raise TargetError("the audit produced no inventory", where=str(argument))
    return Side(str(argument), "image", report.inventory, list(report.findings), report.verdict.value)


def _from_report(path: Path) -> Side:
    from imagelint.report.model import report_from_dict
    from imagelint.report.reading import read_report_dict

    data, sha256 = read_report_dict(path)
    if not data.get("inventory"):
        raise TargetError(
            "the report has no inventory (written by an older imagelint, or not by an image audit)",
            where=str(path),
        )
    report = report_from_dict(data)
    return Side(str(path), "report", data["inventory"], list(report.findings), report.verdict.value, sha256)
