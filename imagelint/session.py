"""One audit run from the command line's point of view: config → rule packs → target → engine → outputs.

The CLI parses arguments; this module does the work so that it can be called from tests and other
commands (the AMI flow runs the same audit) without going through typer.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from imagelint.config import Config, find_config, load_config
from imagelint.engine import RunSettings, audit
from imagelint.errors import UsageError
from imagelint.formats import FORMATS, RenderOptions, get_formatter
from imagelint.report import Report, Verdict
from imagelint.rulepacks import Rule, RulePack, Severity, builtin_pack_paths, load_packs
from imagelint.targets import HostTarget
from imagelint.targets.select import open_target


@dataclass(frozen=True)
class OutputSpec:
    """Where one format goes: a path, or stdout (``None``)."""

    format: str
    path: Path | None = None

    @classmethod
    def parse(cls, spec: str) -> OutputSpec:
        name, sep, path = spec.partition(":")
        if name not in FORMATS:
            raise UsageError(f"--format {spec!r}: unknown format {name!r} (known: {', '.join(FORMATS)})")
        if sep and not path:
            raise UsageError(f"--format {spec!r}: a path must follow the colon")
        return cls(name, Path(path) if path and path != "-" else None)


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


@dataclass(frozen=True)
class JournalOptions:
    """Where `audit` reads the journal from, and whether a missing journal is an error."""

    path: Path | None = None  # a host directory or file; default: the image's own journal
    require: bool = False


def prepare(options: RunOptions) -> tuple[list[RulePack], Config]:
    """Load config and rule packs and apply the command line's overrides; refuse bad usage early."""
    # GitHub workflow commands are lines in the log: they may share stdout with one other format
    if sum(1 for o in options.outputs if o.path is None and o.format != "github") > 1:
        raise UsageError("only one --format can go to stdout; give the others a path (FORMAT:PATH)")
    packs, config = load_rules(options.config_path, options.extra_rules, builtin=options.builtin)
    if options.fail_on is not None:
        try:
            config.fail_on = Severity(options.fail_on)
        except ValueError:
            known = ", ".join(s.value for s in Severity)
            raise UsageError(f"--fail-on {options.fail_on!r}: use one of {known}") from None
    rules = [r for p in packs for r in p.rules]
    if options.select:  # the command line's selection replaces the config's; ignores add up
        config.select = _selectors("--select", options.select, rules)
    config.ignore += _selectors("--ignore", options.ignore, rules)
    return packs, config


def run_audit(
    root: Path,
    options: RunOptions,
    journal: JournalOptions | None = None,
    *,
    live: bool = False,
    partition: int | None = None,
) -> Verdict:
    """``live``: audit the running host (root must be /): its files as an image, plus the host-scope
    rules on the service manager's unit state (one batched ``systemctl show``)."""
    journal = journal or JournalOptions()
    from imagelint.bundle.run import is_bundle

    if is_bundle(root):  # a bundle from the remote collector: --live follows from what it holds
        from imagelint.bundle.run import audit_bundle

        packs, config = prepare(options)
        config.require_journal = journal.require or config.require_journal
        return publish(audit_bundle(root, packs, config), options)
    if live and root.resolve() != Path("/"):
        raise UsageError(f"--live audits the running host: give / as the root (or none), not {root}")
    packs, config = prepare(options)
    from imagelint.facts.journal import JournalRequest

    request = JournalRequest(
        str(journal.path) if journal.path else None, required=journal.require or config.require_journal
    )
    if live and partition is not None:
        raise UsageError("--partition applies to disk image files, not to --live")
    settings = RunSettings(sources=(request,))
    if options.fail_on_new and options.baseline is None:
        raise UsageError("--fail-on-new needs --baseline OLD-report.json")
    if options.baseline is not None:
        from imagelint.report.baseline import load_baseline

        settings.baseline = load_baseline(options.baseline)
        settings.fail_on_new = options.fail_on_new
    if live:
        from imagelint.facts.systemd.live import collect_live_state
        from imagelint.rulepacks import Scope

        settings.scopes = (Scope.IMAGE, Scope.HOST)
        settings.sources = (request, collect_live_state())
        return publish(audit(HostTarget(), packs, config, settings), options)
    report = audit(open_target(root, partition=partition), packs, config, settings)
    return publish(report, options)


def publish(report: Report, options: RunOptions) -> Verdict:
    """Write every requested output; the verdict decides the exit code."""
    render = RenderOptions(show_waived=options.show_waived, sarif_anchor=options.sarif_anchor)
    write_outputs(report, options.outputs, render)
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


def write_outputs(report: Report, outputs: list[OutputSpec], options: RenderOptions) -> None:
    """Render every output first, then write them: a format that fails leaves no output half written,
    and each file is replaced atomically (``imagelint.formats.write_file``)."""
    from imagelint.formats import write_file

    rendered: list[tuple[OutputSpec, str]] = []
    for spec in outputs:
        formatter = get_formatter(spec.format)
        color = spec.path is None and sys.stdout.isatty() and "NO_COLOR" not in os.environ
        rendered.append((spec, formatter.render(report, replace(options, color=color))))
    for spec, text in rendered:
        if spec.path is None:
            sys.stdout.write(text)
            sys.stdout.flush()
            continue
        try:
            write_file(spec.path, text)
        except OSError as exc:
            raise UsageError(
                f"cannot write {spec.format} report: {exc.strerror}", where=str(spec.path)
            ) from None
