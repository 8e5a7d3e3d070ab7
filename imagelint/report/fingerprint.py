"""The stable identity of a finding: what SARIF, the JSON report and baselines match findings by.

Rule id plus what the finding is about (its unit, else its subject or in-image path), never a path
on the machine that ran the audit nor a line number that moves when a file is edited, so the same
fault on next week's image has the same fingerprint. SARIF carries it as
``partialFingerprints.primaryLocationLineHash``; ``audit --baseline`` and ``imagelint diff``
compare findings by it.
"""

from __future__ import annotations

import hashlib
from typing import Any

from imagelint.report.escape import raw_bytes


def fingerprint_of(rule_id: str, unit: str | None, subject: str | None, path: str | None) -> str:
    """The fingerprint of a finding given as its fields (a report's JSON, or a ``Finding``)."""
    key = unit or subject or path or ""
    digest = hashlib.sha256(raw_bytes(f"imagelint\0{rule_id}\0{key}")).hexdigest()
    return f"{digest[:32]}:1"


def fingerprint(finding: Any) -> str:
    """The fingerprint of a ``Finding`` (anything with rule_id, unit, subject and path)."""
    return fingerprint_of(finding.rule_id, finding.unit, finding.subject, finding.path)
