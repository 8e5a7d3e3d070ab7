"""The gate's one decision: which findings fail, and the verdict of a report.

Everything that needs a pass/fail answer calls these two functions: the engine after a run, the
soak when it is cut short, the AWS flow when it merges the reports instances sent back, and the
formats that show a finding's level (SARIF ``error``/``warning``). Nothing else re-derives them.

- :func:`finding_fails`: a finding fails the gate when it is not waived and its severity is at or
  above ``fail-on``, or when its rule is tagged ``always-fail`` (an expired waiver). With
  ``new_only`` (``audit --baseline OLD --fail-on-new``) a finding the baseline already had
  (``baseline_state`` other than ``new``) does not fail, so adopting imagelint on an old image is
  not blocked by its backlog; an ``always-fail`` finding still fails (a baseline does not extend a
  waiver's expiry date).
- :func:`decide`: fail if any finding fails, counting the findings a listing omitted (they are
  decided before any listing is cut); else inconclusive if any data could not be read or any rule
  could not run; else pass. Not-applicable and skipped rules never change the verdict.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from imagelint.report.model import Outcome, Verdict
from imagelint.rulepacks.model import Severity

if TYPE_CHECKING:
    from imagelint.report.model import Report

ALWAYS_FAIL_TAG = "always-fail"


def finding_fails(
    severity: Severity,
    fail_on: Severity,
    tags: Iterable[str] = (),
    *,
    waived: bool = False,
    baseline_state: str | None = None,
    new_only: bool = False,
) -> bool:
    """Whether one finding of a rule with these ``tags`` counts towards a failing verdict."""
    if waived:
        return False
    if ALWAYS_FAIL_TAG in tags:
        return True
    if new_only and baseline_state is not None and baseline_state != "new":
        return False
    return severity.at_least(fail_on)


def decide(report: Report) -> Verdict:
    """The verdict of a whole report, on all of its findings (listed or omitted from the listing)."""
    if any(f.failing for f in report.findings) or any(r.omitted_failing for r in report.rules):
        return Verdict.FAIL
    if report.errors or any(r.outcome is Outcome.ERROR for r in report.rules):
        return Verdict.INCONCLUSIVE
    return Verdict.PASS
