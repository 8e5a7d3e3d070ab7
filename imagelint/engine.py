"""The engine: select rules, run them against a target, apply waivers, and hand the report to the gate.

The verdict itself is decided in one place, :mod:`imagelint.report.verdict`: the engine marks each
finding with :func:`~imagelint.report.verdict.finding_fails`, calls
:func:`~imagelint.report.verdict.decide` on *all* findings, and only then cuts the listing to
``MAX_FINDINGS_PER_RULE`` per rule (failing findings listed first; what is cut stays counted).
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import field
from typing import Any

from imagelint import __version__
from imagelint.checks import CheckContext, NotApplicable, Observation, registry
from imagelint.checks.base import CheckSettings, FactProvider, RunLog
from imagelint.config import Config
from imagelint.errors import ImageLintError, where_raised
from imagelint.records import dataclass
from imagelint.report import Finding, Outcome, Report, ReportError, RuleResult, Verdict
from imagelint.report.verdict import ALWAYS_FAIL_TAG, decide, finding_fails, fold_evidence
from imagelint.rulepacks import CheckSpec, Rule, RulePack, RuleStatus, Scope, Severity
from imagelint.targets.interface import Target

MAX_FINDINGS_PER_RULE = 100  # listed per rule; the rest are counted, and decided on all the same


@dataclass
class RunSettings:
    """How a command runs the engine: the scopes it covers, the day waivers are judged on, and the
    data sources it collected (the soak's measurements, the live unit state, where to read the
    journal...), which checks find by type through :class:`~imagelint.checks.base.FactProvider`."""

    scopes: tuple[Scope, ...] = (Scope.IMAGE,)
    today: dt.date = field(default_factory=lambda: dt.datetime.now(dt.UTC).date())
    sources: tuple[object, ...] = ()
    baseline: Any = None  # imagelint.report.baseline.Baseline: mark findings new/unchanged/absent
    fail_on_new: bool = False  # with a baseline: only findings it lacks can fail


def audit(target: Target, packs: list[RulePack], config: Config, settings: RunSettings) -> Report:
    started = time.monotonic()
    started_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    settings_for_checks = CheckSettings(
        expected_units=tuple(config.expected_units),
        provided_at_launch=tuple(config.provided_at_launch),
        waivers=tuple(config.waivers),
        today=settings.today,
    )
    facts = FactProvider(target, settings.sources)
    log = RunLog()
    results: list[RuleResult] = []
    findings: list[Finding] = []
    errors: list[ReportError] = []
    for rule in (r for pack in packs for r in pack.rules):
        skip = skip_reason(rule, config, settings.scopes)
        severity = config.severity.get(rule.id) or config.severity.get(rule.name) or rule.severity
        result = RuleResult(
            rule.id,
            rule.name,
            rule.title,
            severity,
            Outcome.SKIPPED,
            rule.pack,
            reason=skip or "",
            description=rule.description.strip(),
            remediation=rule.remediation.strip(),
            tags=list(rule.tags),
            references=list(rule.references),
        )
        results.append(result)
        if skip:
            continue
        if rule.status is RuleStatus.DEPRECATED:
            instead = f"; use {rule.replaced_by} instead" if rule.replaced_by else ""
            log.warnings.append((rule.source or rule.id, f"{rule.id} ({rule.name}) is deprecated{instead}"))
        t0 = time.perf_counter()
        ctx = CheckContext(settings_for_checks, facts, log)  # a fresh collector for each rule
        result.outcome, result.reason, observations = _evaluate(ctx, rule, errors)
        result.duration_ms = (time.perf_counter() - t0) * 1000
        log.notes += [f"{rule.id}: {text}" for text in ctx.explanations]
        rule_findings = [_finding(rule, severity, obs, config, settings.today) for obs in observations]
        for finding in rule_findings:
            if settings.baseline is not None:
                finding.baseline_state = settings.baseline.state(finding)
            finding.failing = finding_fails(
                severity,
                config.fail_on,
                rule.tags,
                waived=finding.waiver is not None,
                baseline_state=finding.baseline_state,
                new_only=settings.fail_on_new,
            )
        findings += rule_findings
        result.findings = len(rule_findings)
        if rule_findings and all(f.waiver for f in rule_findings):
            result.outcome = Outcome.WAIVED
    report = Report(
        tool_version=__version__,
        target={"kind": target.kind, "path": target.description},
        scopes=[s.value for s in settings.scopes],
        started_at=started_at,
        duration_s=time.monotonic() - started,
        fail_on=config.fail_on,
        verdict=Verdict.PASS,
        rule_packs=[
            {"name": p.name, "path": p.path, "sha256": p.sha256, "builtin": p.builtin, "rules": len(p.rules)}
            for p in packs
        ],
        config={"path": config.path, "sha256": config.sha256} if config.path else None,
        rules=results,
        findings=findings,
        errors=errors,
        warnings=[ReportError(message, where=where) for where, message in log.warnings],
    )
    if Scope.IMAGE in settings.scopes:
        _add_inventory(report, CheckContext(settings_for_checks, facts, log))
    _add_damage(report, target)
    if settings.baseline is not None:
        _add_baseline(report, settings)
    report.facts.update({name: to_dict() for name, to_dict in log.recorded.items()})
    report.facts.update(target.facts())  # what the target opened (a disk image: container, partitions, I/O)
    report.notes.extend(log.notes)
    fold_evidence(
        report.findings,
        {rule.id: rule.subsumes for pack in packs for rule in pack.rules if rule.subsumes},
        {rule.id for pack in packs for rule in pack.rules if ALWAYS_FAIL_TAG in rule.tags},
    )
    report.verdict = decide(report)  # on every finding, before the listing is cut
    report.cut_listing(MAX_FINDINGS_PER_RULE)
    return report


def _add_inventory(report: Report, ctx: CheckContext) -> None:
    from imagelint.checks.systemd import image_inventory

    report.inventory = image_inventory(ctx)
    if not report.inventory["complete"]:
        problems = "; ".join(report.inventory["problems"][:5])
        report.warnings.append(ReportError(f"inventory incomplete: {problems}"))


def _add_damage(report: Report, target: Target) -> None:
    """Each damaged read the target met is an error of the run, so it cannot pass on it: a rule that
    met the damage has said so already; a fact that carried on without the data is said here."""
    said = {e.where for e in report.errors}
    for path, why in target.damaged():
        if path not in said:
            report.errors.append(ReportError(f"damaged, not read: {why}", where=path))
            said.add(path)


def _add_baseline(report: Report, settings: RunSettings) -> None:
    """Findings the baseline had and this run lacks, the counts by state, and a note for people."""
    report.absent_findings = settings.baseline.absent()
    report.baseline = settings.baseline.summary(
        report.findings, report.absent_findings, fail_on_new=settings.fail_on_new
    )
    b = report.baseline
    report.notes.append(
        f"baseline {b['path']}: {b['new']} new, {b['unchanged']} unchanged, {b['absent']} absent"
        + (" (only new findings can fail: --fail-on-new)" if settings.fail_on_new else "")
    )


def skip_reason(rule: Rule, config: Config, scopes: tuple[Scope, ...]) -> str | None:
    if rule.status is RuleStatus.REMOVED:
        instead = f"; use {rule.replaced_by}" if rule.replaced_by else ""
        return f"removed since {rule.since or 'an earlier version'}{instead}"
    if rule.status is RuleStatus.PREVIEW and not any(rule.named_by(s) for s in config.select):
        return "preview rule: runs only when selected by its id or name"
    if not set(rule.scopes) & set(scopes):
        return f"scope {'/'.join(rule.scopes)} is not part of this run ({'/'.join(scopes)})"
    if config.select and not any(rule.matches(s) for s in config.select):
        return "not selected by the configuration"
    if any(rule.matches(s) for s in config.ignore):
        return "ignored by the configuration"
    return None


def _evaluate(
    ctx: CheckContext, rule: Rule, errors: list[ReportError]
) -> tuple[Outcome, str, list[Observation]]:
    try:
        for condition in rule.check.when:
            if not _holds(ctx, condition):
                return Outcome.NOT_APPLICABLE, f"condition not met: {_describe(condition)}", []
        for condition in rule.check.unless:
            if _holds(ctx, condition):
                return Outcome.PASS, f"exempt: {_describe(condition)}", []
        observations = registry()[rule.check.kind].evaluate(ctx, rule.check.arguments)
    except NotApplicable as exc:
        return Outcome.NOT_APPLICABLE, exc.reason, []
    except ImageLintError as exc:
        errors.append(ReportError(exc.message, rule_id=rule.id, where=exc.where))
        return Outcome.ERROR, str(exc), []
    except MemoryError:
        raise  # the run's memory limit (imagelint.limits): the whole run is inconclusive, in one line
    except Exception as exc:  # a bug in one check must not stop the others
        where = where_raised(exc)
        errors.append(
            ReportError(f"internal error: {type(exc).__name__}: {exc}", rule_id=rule.id, where=where)
        )
        return Outcome.ERROR, f"internal error: {type(exc).__name__}: {exc}", []
    if ctx.gaps:  # part of the data was unreadable: what was read still counts, but cannot pass
        for where, message in ctx.gaps:
            errors.append(ReportError(message, rule_id=rule.id, where=where))
        reason = f"incomplete data: {len(ctx.gaps)} source(s) could not be read in full"
        return (Outcome.FAIL if observations else Outcome.ERROR), reason, observations
    return (Outcome.FAIL if observations else Outcome.PASS), "; ".join(ctx.explanations), observations


def _holds(ctx: CheckContext, condition: CheckSpec) -> bool:
    """A condition holds when its check finds something. Its own conditions apply too."""
    if any(not _holds(ctx, c) for c in condition.when) or any(_holds(ctx, c) for c in condition.unless):
        return False
    try:
        return bool(registry()[condition.kind].evaluate(ctx, condition.arguments))
    except NotApplicable:
        return False


def _describe(spec: CheckSpec) -> str:
    params = ", ".join(f"{k}={v}" for k, v in spec.params.items())
    return f"{spec.kind}({params})"


def _finding(rule: Rule, severity: Severity, obs: Observation, config: Config, today: dt.date) -> Finding:
    variables = {"id": rule.id, "name": rule.name, **obs.variables()}
    message = rule.message.format_map(_Blank(variables))
    waiver = next(
        (w for w in config.waivers if not w.expired(today) and w.covers(rule, obs.path, obs.unit)),
        None,
    )
    return Finding(
        rule_id=rule.id,
        rule_name=rule.name,
        severity=severity,
        message=message,
        subject=obs.subject,
        remediation=rule.remediation,
        path=obs.path,
        line=obs.line,
        unit=obs.unit,
        evidence=obs.evidence,
        waiver=waiver.to_dict() if waiver else None,
    )


class _Blank(dict[str, object]):
    """Template variables; a variable a particular observation lacks renders as '-'."""

    def __getitem__(self, key: str) -> object:
        value = super().get(key)
        return "-" if value is None else value

    def __missing__(self, key: str) -> str:
        return "-"
