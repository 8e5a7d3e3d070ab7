"""One side of ``imagelint diff``: a JSON report file, or an image audited now.

A JSON report is read back (:mod:`imagelint.report.reading`: capped, schema-checked); anything else
is opened by the same openers ``audit`` uses (a directory, a disk image, ``ebs:snap-…``, a bundle)
and audited with the run's rules and config, so that both sides carry findings as well as an
inventory. A report without an inventory (written before inventories
existed, or by a soak) cannot be compared: exit 3, naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagelint.diff.compare import Side
from imagelint.errors import TargetError

if TYPE_CHECKING:
    from imagelint.openers import OpenOptions
    from imagelint.session import PreparedRun


def load_side(argument: Path, run: PreparedRun, opening: OpenOptions | None = None) -> Side:
    """A report read back, or any image the openers open, audited now with the run's rules."""
    from dataclasses import replace

    from imagelint.openers import OpenOptions, open_spec
    from imagelint.session import audit_opened

    opening = replace(opening or OpenOptions(), reports=True)
    with open_spec(str(argument), opening) as opened:
        if opened.report is not None:
            return _from_report(argument, *opened.report)
        report = audit_opened(run, opened)
    if report.inventory is None:  # pragma: no cover - every image-scope audit has one
        raise TargetError("the audit produced no inventory", where=str(argument))
    return Side(str(argument), "image", report.inventory, list(report.findings), report.verdict.value)


def _from_report(path: Path, data: dict[str, Any], sha256: str) -> Side:
    from imagelint.report.model import report_from_dict

    if not data.get("inventory"):
        raise TargetError(
            "the report has no inventory (written by an older imagelint, or not by an image audit)",
            where=str(path),
        )
    report = report_from_dict(data)
    return Side(str(path), "report", data["inventory"], list(report.findings), report.verdict.value, sha256)
