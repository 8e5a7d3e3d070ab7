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
- :func:`fold_evidence`: a rule that combines the evidence of others on one unit (IL206, the boot
  failure loop, ``subsumes: [IL201, IL203, IL501, …]``) carries the failure for all of it: where its
  finding fails, the findings of the rules it subsumes on the same unit are marked ``part_of`` it
  and stop failing on their own. They stay listed and counted (nothing is lost). Only a failing
  finding absorbs others, and a finding of an ``always-fail`` rule is never absorbed, so folding
  never changes a verdict: it decides which finding carries the failure, so that one fault is one
  failing finding.
- :func:`fails_on_its_own`: whether one finding failed before folding (what a diff compares).
- :func:`with_leftovers`: the exit verdict of a run whose cleanup failed (a pass becomes exit 3).
- :func:`decide`: fail if any finding fails, counting the findings a listing omitted (they are
  decided before any listing is cut); else inconclusive if any data could not be read or any rule
  could not run; else pass. Not-applicable and skipped rules never change the verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from imagelint.report.model import Outcome, Verdict
from imagelint.rulepacks.model import Severity

if TYPE_CHECKING:
    from imagelint.report.model import Finding, Report

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


def fold_evidence(
    findings: list[Finding], subsumes: Mapping[str, Iterable[str]], always_fail: Iterable[str] = ()
) -> None:
    """Mark the findings each failing combining finding names as evidence (same unit) ``part_of`` it.

    ``subsumes``: rule id → the ids of the rules it combines; ``always_fail``: ids of rules tagged
    ``always-fail`` (never absorbed). Call on every finding of a run, before the listing is cut.
    """
    carriers: dict[tuple[str, str], str] = {}
    for finding in findings:
        if finding.failing and finding.unit and subsumes.get(finding.rule_id):
            for rule_id in subsumes[finding.rule_id]:
                carriers.setdefault((rule_id, finding.unit), finding.rule_id)
    if not carriers:
        return
    keep = set(always_fail)
    for finding in findings:
        carrier = carriers.get((finding.rule_id, finding.unit or ""))
        if carrier and finding.failing and finding.rule_id not in keep and finding.part_of is None:
            finding.part_of = carrier
            finding.failing = False


def fails_on_its_own(finding: Finding) -> bool:
    """Whether ``finding`` fails the gate by its own marks (waiver, severity, baseline), folded or not:
    folding only names which finding carries a failure, so a finding folded ``part_of`` another
    failed before it was folded. A comparison of findings (``imagelint diff``) asks this, never
    ``failing`` alone: a new failing finding must fail the diff whatever it was folded into."""
    return finding.failing or finding.part_of is not None


def decide(report: Report) -> Verdict:
    """The verdict of a whole report, on all of its findings (listed or omitted from the listing)."""
    if any(f.failing for f in report.findings) or any(r.omitted_failing for r in report.rules):
        return Verdict.FAIL
    if report.errors or any(r.outcome is Outcome.ERROR for r in report.rules):
        return Verdict.INCONCLUSIVE
    return Verdict.PASS


def with_leftovers(verdict: Verdict, cleanup_failed: bool) -> Verdict:
    """What a run that created cloud resources ends with (its exit code) when a cleanup step failed:
    the report keeps the audit's verdict, but a pass becomes inconclusive (exit 3) so that a resource
    left behind, which may cost money, never ends a run silently; a fail stays a fail (exit 1)."""
    if cleanup_failed and verdict is Verdict.PASS:
        return Verdict.INCONCLUSIVE
    return verdict
