"""One audit run from the command line's point of view: config → rule packs → target → engine → outputs.

The CLI parses arguments; this module does the work so that it can be called from tests and other
commands (the AMI flow runs the same audit) without going through typer.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from imagelint.config import Config, find_config, load_config
from imagelint.engine import RunSettings, audit
from imagelint.errors import UsageError
from imagelint.formats import FORMATS, RenderOptions, get_formatter
from imagelint.report import Report, Verdict
from imagelint.rulepacks import Rule, RulePack, Severity, builtin_pack_paths, load_packs
from imagelint.targets import RootfsTarget


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
    return packs, config


def run_audit(
    *,
    root: Path,
    config_path: Path | None,
    extra_rules: list[Path],
    builtin: bool,
    outputs: list[OutputSpec],
    fail_on: str | None = None,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    show_waived: bool = False,
) -> Verdict:
    if sum(1 for o in outputs if o.path is None) > 1:
        raise UsageError("only one --format can go to stdout; give the others a path (FORMAT:PATH)")
    packs, config = load_rules(config_path, extra_rules, builtin=builtin)
    if fail_on is not None:
        try:
            config.fail_on = Severity(fail_on)
        except ValueError:
            raise UsageError(
                f"--fail-on {fail_on!r}: use one of {', '.join(s.value for s in Severity)}"
            ) from None
    rules = [r for p in packs for r in p.rules]
    if select:  # the command line's selection replaces the config's; ignores add up
        config.select = _selectors("--select", select, rules)
    config.ignore += _selectors("--ignore", ignore or [], rules)
    target = RootfsTarget(root)
    report = audit(target, packs, config, RunSettings())
    write_outputs(report, outputs, RenderOptions(show_waived=show_waived))
    return report.verdict


def _selectors(option: str, given: list[str], rules: list[Rule]) -> list[str]:
    """Selectors from repeatable, comma-separated options; each must match a loaded rule."""
    selectors = [s.strip() for item in given for s in item.split(",") if s.strip()]
    for selector in selectors:
        if not any(r.matches(selector) for r in rules):
            raise UsageError(f"{option} {selector!r} matches no loaded rule (see `imagelint rules list`)")
    return selectors


def write_outputs(report: Report, outputs: list[OutputSpec], options: RenderOptions) -> None:
    for spec in outputs:
        formatter = get_formatter(spec.format)
        if spec.path is None:
            color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
            sys.stdout.write(formatter.render(report, replace(options, color=color)))
            sys.stdout.flush()
            continue
        text = formatter.render(report, replace(options, color=False))
        try:
            spec.path.parent.mkdir(parents=True, exist_ok=True)
            spec.path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(
                f"cannot write {spec.format} report: {exc.strerror}", where=str(spec.path)
            ) from None
