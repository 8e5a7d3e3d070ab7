"""One run from the command line's point of view: config → rule packs → target → engine → outputs.

:func:`prepare` turns the command's options into a :class:`PreparedRun` once per invocation;
:func:`evaluate` is the one caller of the engine (every door, audit, bundles, soak, watch, ``ami``,
``fleet``, ``diff``, hands it a target and its sources), so that the config means the same through
each; :func:`publish` writes the outputs. The CLI parses arguments; this module does the work so that
it can be called from tests and other commands without going through typer.
"""

from __future__ import annotations

import os
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from imagelint.config import Config, find_config, load_config
from imagelint.errors import UsageError
from imagelint.formats import RenderOptions
from imagelint.formats.outputs import OutputSpec, one_to_stdout, write_outputs
from imagelint.records import dataclass
from imagelint.report import Report, Verdict
from imagelint.rulepacks import Rule, RulePack, Scope, Severity, builtin_pack_paths, load_packs
from imagelint.targets.interface import Target

if TYPE_CHECKING:
    from imagelint.collector.plan import Plan
    from imagelint.facts.journal.console import ConsoleLog
    from imagelint.facts.soak import SoakFacts
    from imagelint.openers import Opened, OpenOptions
    from imagelint.report.baseline import Baseline


def load_rules(
    config_path: Path | None, extra: list[Path], *, builtin: bool
) -> tuple[list[RulePack], Config]:
    config = load_config(find_config(config_path, Path.cwd()))
    builtin_paths = builtin_pack_paths() if builtin and config.builtin_rules else []
    packs = load_packs([*config.rule_packs, *extra], builtin=builtin_paths)
    config.check_references([r for p in packs for r in p.rules])
    config.apply_parameters(packs)
    return packs, config


@dataclass
class RunOptions:
    """What every command that runs rules shares: config, rule packs, selection, outputs."""

    config_path: Path | None = None
    extra_rules: list[Path] = field(default_factory=list)
    builtin: bool = True
    outputs: list[OutputSpec] = field(default_factory=lambda: [OutputSpec("text")])
    fail_on: str | None = None
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    show_waived: bool = False
    sarif_anchor: str | None = None  # repository file SARIF results are anchored to
    github: bool = False  # GitHub Actions mode: also write the step summary and outputs
    baseline: Path | None = None  # audit --baseline: the previous image's JSON report
    fail_on_new: bool = False  # audit --fail-on-new: only findings the baseline lacks can fail


class JournalOptions(NamedTuple):
    """Where `audit` reads the journal from, and whether a missing journal is an error."""

    path: Path | None = None  # a host directory or file; default: the image's own journal
    require: bool = False


@dataclass(frozen=True)
class PreparedRun:
    """Everything a command decided before it opens a target: built once per invocation by
    :func:`prepare` (``ami`` and ``fleet`` too, whatever the number of images and instances), and
    never changed after. The config has the command line's overrides in it already."""

    options: RunOptions
    packs: tuple[RulePack, ...]
    config: Config
    baseline: Baseline | None = None

    @property
    def rules(self) -> tuple[list[RulePack], Config]:
        """The packs and config, for what only reads them (the collector's plan)."""
        return list(self.packs), self.config


def prepare(options: RunOptions, *, require_journal: bool = False) -> PreparedRun:
    """Load config and rule packs, apply the command line's overrides once, refuse bad usage early."""
    one_to_stdout(options.outputs)
    if options.fail_on_new and options.baseline is None:
        raise UsageError("--fail-on-new needs --baseline OLD-report.json")
    packs, config = load_rules(options.config_path, options.extra_rules, builtin=options.builtin)
    overrides: dict[str, object] = {"require_journal": require_journal or config.require_journal}
    if options.fail_on is not None:
        try:
            overrides["fail_on"] = Severity(options.fail_on)
        except ValueError:
            known = ", ".join(s.value for s in Severity)
            raise UsageError(f"--fail-on {options.fail_on!r}: use one of {known}") from None
    rules = [r for p in packs for r in p.rules]
    if options.select:  # the command line's selection replaces the config's; ignores add up
        overrides["select"] = _selectors("--select", options.select, rules)
    overrides["ignore"] = [*config.ignore, *_selectors("--ignore", options.ignore, rules)]
    baseline = None
    if options.baseline is not None:
        from imagelint.report.baseline import load_baseline

        if not os.path.lexists(options.baseline):  # a name the user gave that is not there: usage, as -c
            raise UsageError(f"--baseline {options.baseline}: no such file")
        baseline = load_baseline(options.baseline)
    return PreparedRun(options, tuple(packs), replace(config, **overrides), baseline)  # type: ignore[arg-type]


def evaluate(
    run: PreparedRun,
    target: Target,
    *,
    scopes: tuple[Scope, ...] = (Scope.IMAGE,),
    sources: tuple[object, ...] = (),
    journal: Path | None = None,
) -> Report:
    """The one caller of the engine: every door hands it a target, its scopes and its data sources.

    The config's semantics are applied here and nowhere else, so they hold through every door: where
    the journal is read and whether its absence is inconclusive (``require-journal``), selection,
    severities, waivers and the baseline."""
    from imagelint.engine import RunSettings, audit
    from imagelint.facts.journal import JournalRequest

    if Scope.SOAK not in scopes and not any(isinstance(s, JournalRequest) for s in sources):
        request = JournalRequest(str(journal) if journal else None, required=run.config.require_journal)
        sources = (request, *sources)
    settings = RunSettings(
        scopes=scopes, sources=sources, baseline=run.baseline, fail_on_new=run.options.fail_on_new
    )
    return audit(target, list(run.packs), run.config, settings)


def judge_soak(run: PreparedRun, target: Target, facts: SoakFacts) -> Report:
    """The soak-scope rules on what a soak measured (here, or recorded in a bundle); the journal of
    ``target`` gives the restarts logged in the window. A soak cut short cannot pass."""
    from imagelint.facts.journal.window import restarts_logged_between
    from imagelint.report import ReportError
    from imagelint.report.verdict import decide

    result = facts.result
    facts.journal_restarts, facts.journal_note = restarts_logged_between(
        target, result.started_wall, result.ended_wall
    )
    report = evaluate(run, target, scopes=(Scope.SOAK,), sources=(facts,))
    report.facts["soak"] = facts.to_dict()
    report.notes.extend(facts.summary_lines())
    if result.cut_short:
        measured = f"{result.elapsed:.0f} s of {result.duration:.0f} s"
        note = f"cut short after {measured}; the report covers what was measured"
        report.errors.append(ReportError(note, where="soak"))
        report.verdict = decide(report)
    return report


def judge_console(run: PreparedRun, target: Target, log: ConsoleLog) -> Report:
    """A machine's serial console judged by the rules that read only the journal's kernel lines
    (ENA resets, lockups, stalls, hung tasks, OOM kills: ``CheckKind.kernel_lines_only``), through
    the same checks and signal specs as a journal, its kernel lines read as one (the other rules
    are not run: the console holds nothing else they read). ``target`` is what the report names."""
    from imagelint.checks import registry
    from imagelint.facts.journal import JournalRequest

    kinds = registry()

    def reads_console(rule: Rule) -> bool:
        check = rule.check
        return not (check.when or check.unless) and kinds[check.kind].kernel_lines_only(check.arguments)

    packs = tuple(replace(pack, rules=[r for r in pack.rules if reads_console(r)]) for pack in run.packs)
    request = JournalRequest(console=log, required=True)
    return evaluate(replace(run, packs=packs), target, scopes=(Scope.HOST,), sources=(request,))


def soak_bundle(run: PreparedRun, spec: str, opening: OpenOptions | None = None) -> Report:
    """``soak --from-bundle BUNDLE``, and ``soak ssh://HOST`` (``opening`` has the plan with the
    soak): the soak the collector recorded, judged here."""
    from imagelint.openers import open_spec

    with open_spec(spec, opening) as opened:
        facts = opened.soak() if opened.kind in ("bundle", "ssh") else None
        if facts is None or opened.target is None:
            raise UsageError("not a bundle with soak samples (it was collected without a soak)", where=spec)
        return judge_soak(run, opened.target, facts)


def collecting(
    run: PreparedRun, opening: OpenOptions, *, soak_seconds: float = 0, soak_interval: float = 5
) -> OpenOptions:
    """``opening`` with the collector's plan for ``run`` (what a host reached over ssh gathers): the
    plan of a throwaway instance or a fleet host, so a host is judged as its bundle would be."""

    def plan() -> Plan:
        from imagelint.collector.plan import instance_plan

        return instance_plan(*run.rules, soak_seconds=soak_seconds, soak_interval=soak_interval)

    return replace(opening, plan=plan)


def bundle_reports(run: PreparedRun, path: Path) -> list[tuple[str, Report]]:
    """("audit", report) and, with soak samples, ("soak", report): the parts a remote run merges."""
    from imagelint.openers import open_spec

    with open_spec(str(path), kind="bundle") as opened:
        parts = [("audit", audit_opened(run, opened))]
        facts = opened.soak()
        if facts is not None and opened.target is not None:
            parts.append(("soak", judge_soak(run, opened.target, facts)))
        return parts


def audit_opened(run: PreparedRun, opened: Opened, *, journal: Path | None = None) -> Report:
    """The audit of what an opener opened, with what the opener adds to the report."""
    if opened.target is None:
        raise UsageError(f"a {opened.kind} is not an image to audit")
    report = evaluate(run, opened.target, scopes=opened.scopes, sources=opened.sources, journal=journal)
    return opened.annotate(report)


def run_audit(
    spec: str, options: RunOptions, journal: JournalOptions | None = None, opening: OpenOptions | None = None
) -> Verdict:
    """``imagelint audit SPEC``: whatever the spec names (see :mod:`imagelint.openers`), audited."""
    from imagelint.openers import OpenOptions, open_spec

    journal = journal or JournalOptions()
    run = prepare(options, require_journal=journal.require)
    with open_spec(spec, collecting(run, opening or OpenOptions())) as opened:
        report = audit_opened(run, opened, journal=journal.path)
    return publish(report, options)


def publish(report: Report, options: RunOptions) -> Verdict:
    """Write every requested output; the verdict decides the exit code."""
    render_options = RenderOptions(show_waived=options.show_waived, sarif_anchor=options.sarif_anchor)
    write_outputs(report, options.outputs, render_options)
    if options.github:
        from imagelint.formats import github

        github.publish(report)
    return report.verdict


def _selectors(option: str, given: list[str], rules: list[Rule]) -> list[str]:
    """Selectors from repeatable, comma-separated options; each must match a loaded rule."""
    selectors = [s.strip() for item in given for s in item.split(",") if s.strip()]
    for selector in selectors:
        if not any(r.matches(selector) for r in rules):
            raise UsageError(f"{option} {selector!r} matches no loaded rule (see `imagelint rules list`)")
    return selectors
