"""Words the human formats (text, Markdown) share: rule states that cannot be misread, and the summary.

A rule's ``outcome`` is ``fail`` as soon as it has a finding that is not waived, even when every one
of them is below ``fail-on``; a passing run that read "rules: 2 passed, 3 failed" confused people. So
the human formats name the state of each rule for what it means to the gate:

- "with failing findings": outcome ``fail``, and a finding of it (listed or not) fails the gate;
- "with findings below fail-on": outcome ``fail``, and none of its findings fails the gate;
- "with findings part of another rule's": outcome ``fail``, none of its findings fails the gate, and
  one that would is folded into a failing finding of a rule that combines it (``part_of``, IL206);
- "with findings the baseline already had": ``audit --baseline --fail-on-new``, and its findings at
  or above ``fail-on`` are all in the baseline (so none fails);
- "with only waived findings": outcome ``waived``;
- "clean": outcome ``pass``;
- "not applicable": outcome ``not-applicable`` (what the rule checks is absent);
- "could not run": outcome ``error`` (the run cannot pass);
- "skipped": outcome ``skipped`` (out of this run's scope, or deselected).

:func:`summary_line` is the one-line summary of the text format: the verdict first, then the true
finding counts (:meth:`Report.counts`, which includes the findings a listing cap left out), the failing
count against ``fail-on`` (and how many findings are part of a failing one, where any are), the
waived count, the errors, then the rule states. It holds no string from
the image, so it is always exactly one line.
"""

from __future__ import annotations

from imagelint.report import Outcome, Report, RuleResult

# (state, its words), most urgent first; the order of the summary
STATES: tuple[tuple[str, str], ...] = (
    ("error", "could not run"),
    ("failing", "with failing findings"),
    ("folded", "with findings part of another rule's"),
    ("baselined", "with findings the baseline already had"),
    ("below", "with findings below fail-on"),
    ("waived", "with only waived findings"),
    ("clean", "clean"),
    ("not-applicable", "not applicable"),
    ("skipped", "skipped"),
)
_WORDS = dict(STATES)
_BY_OUTCOME = {
    Outcome.ERROR: "error",
    Outcome.WAIVED: "waived",
    Outcome.PASS: "clean",
    Outcome.NOT_APPLICABLE: "not-applicable",
    Outcome.SKIPPED: "skipped",
}


def plural(count: int, noun: str, plural_noun: str | None = None) -> str:
    """``1 rule``, ``3 rules``."""
    return f"{count} {noun if count == 1 else (plural_noun or noun + 's')}"


def failing_rules(report: Report) -> set[str]:
    """Ids of the rules with at least one finding that fails the gate, listed or left out of the listing."""
    ids = {f.rule_id for f in report.findings if f.failing}
    ids.update(r.rule_id for r in report.rules if r.omitted_failing)
    return ids


def folded_rules(report: Report) -> set[str]:
    """Ids of the rules with a finding folded into another rule's failing finding (``part_of``)."""
    return {f.rule_id for f in report.findings if f.part_of} - failing_rules(report)


def baselined_rules(report: Report) -> set[str]:
    """Under ``--fail-on-new``: ids of the rules whose findings at or above fail-on are all unchanged
    from the baseline (they would fail without it)."""
    if not (report.baseline and report.baseline.get("fail_on_new")):
        return set()
    from imagelint.report.verdict import finding_fails

    found = {
        f.rule_id
        for f in report.findings
        if f.baseline_state == "unchanged"
        and finding_fails(f.severity, report.fail_on, waived=f.waiver is not None)
    }
    return found - failing_rules(report)


def rule_state(
    result: RuleResult, failing: set[str], baselined: set[str] | None = None, folded: set[str] | None = None
) -> str:
    """The state key of one rule (see :data:`STATES`); ``failing`` is :func:`failing_rules`,
    ``baselined`` :func:`baselined_rules`, ``folded`` :func:`folded_rules`."""
    if result.outcome is Outcome.FAIL:
        if result.rule_id in failing:
            return "failing"
        if result.rule_id in (folded or set()):
            return "folded"
        return "baselined" if result.rule_id in (baselined or set()) else "below"
    return _BY_OUTCOME[result.outcome]


def rule_state_words(result: RuleResult, failing: set[str], folded: set[str] | None = None) -> str:
    """What one rule's state means, in words: ``with findings below fail-on``, ``clean``..."""
    return _WORDS[rule_state(result, failing, folded=folded)]


def rule_states(report: Report) -> list[str]:
    """The rules counted by state, most urgent first, states with no rule left out:
    ``["11 rules with failing findings", "1 rule with findings below fail-on", "7 rules clean"]``."""
    failing, baselined, folded = failing_rules(report), baselined_rules(report), folded_rules(report)
    counts = dict.fromkeys(_WORDS, 0)
    for result in report.rules:
        counts[rule_state(result, failing, baselined, folded)] += 1
    return [f"{plural(counts[key], 'rule')} {words}" for key, words in STATES if counts[key]]


def finding_counts(report: Report) -> str:
    """``12 finding(s) (1 critical, 8 high) · 11 failing (fail-on=medium) · 2 waived · 0 errors``:
    true totals, counting the findings a listing cap left out."""
    counts = report.counts()
    severities = ", ".join(f"{n} {s}" for s, n in reversed(counts["by_severity"].items()) if n)
    folded = sum(1 for f in report.findings if f.part_of)
    return " · ".join(
        [
            f"{counts['findings']} finding(s)" + (f" ({severities})" if severities else ""),
            f"{counts['failing']} failing (fail-on={report.fail_on.value})",
            *([f"{folded} part of a failing finding"] if folded else []),
            f"{counts['waived']} waived",
            f"{counts['errors']} error(s)",
        ]
    )


def summary_line(report: Report) -> str:
    """The verdict, the counts and the rule states, on one line (nothing in it comes from the image)."""
    states = ", ".join(rule_states(report)) or "no rules"
    return f"{report.verdict.value.upper()}: {finding_counts(report)} · {states}"
