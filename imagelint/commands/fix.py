"""``imagelint fix TARGET``: the audit's failing findings, remediated by the fixes their rules declare.

One door like ``audit``: the target is opened through the opener registry and audited through the
session. The plan (:mod:`imagelint.remedy.plan`) is printed as a POSIX sh script (default), a Packer
provisioner block (``-f packer``) or a list of actions with the findings each clears
(``--dry-run``), or performed on a directory target (``--apply``) and the target audited again.
"""

from __future__ import annotations

import sys

from imagelint import __version__, stderr
from imagelint.errors import ExitCode, UsageError
from imagelint.openers import OpenOptions, open_spec
from imagelint.records import dataclass
from imagelint.remedy.plan import Plan, make_plan
from imagelint.report import Report, Verdict
from imagelint.report.escape import for_log
from imagelint.session import RunOptions, audit_opened, prepare
from imagelint.targets.rootfs import RootfsTarget

FORMATS = ("sh", "packer")


@dataclass(frozen=True)
class FixMode:
    format: str = "sh"
    dry_run: bool = False
    apply: bool = False


def run_fix(spec: str, options: RunOptions, mode: FixMode, opening: OpenOptions | None = None) -> int:
    if mode.format not in FORMATS:
        raise UsageError(f"-f {mode.format!r}: use one of {', '.join(FORMATS)}")
    if mode.apply and mode.dry_run:
        raise UsageError("--apply and --dry-run exclude each other")
    opening = opening or OpenOptions()
    if mode.apply and opening.live:
        raise UsageError("--apply changes a directory tree only, not a live host")
    run = prepare(options)
    rules = [r for p in run.packs for r in p.rules]
    with open_spec(spec, opening) as opened:
        if opened.target is None:
            raise UsageError(f"a {opened.kind} is not an image to fix", where=spec)
        if mode.apply and type(opened.target) is not RootfsTarget:
            raise UsageError(
                f"--apply changes a directory tree only; this is a {opened.kind}: print the script "
                "(the default) and run it where the image is built or mounted",
                where=spec,
            )
        report = audit_opened(run, opened)
        plan = make_plan(report, rules, opened.target)
        root = opened.target.root if type(opened.target) is RootfsTarget else None
    if mode.dry_run:
        sys.stdout.write(dry_run_text(plan))
    elif mode.apply and root is not None:
        from imagelint.remedy.apply import apply_plan
        from imagelint.remedy.rootdir import RootDir

        for change in apply_plan(plan, RootDir(root)):
            stderr.line(f"imagelint fix: {change}")
        _tell_manual(plan)
        with open_spec(spec, opening) as opened:
            after = audit_opened(run, opened)
        _tell_remaining(after)
        return int(after.verdict.exit_code)
    else:
        from imagelint.remedy.script import render_packer, render_script

        render = render_packer if mode.format == "packer" else render_script
        sys.stdout.write(render(plan, spec, __version__))
        _tell_manual(plan)
    return int(ExitCode.INCONCLUSIVE) if report.verdict is Verdict.INCONCLUSIVE else int(ExitCode.PASS)


def dry_run_text(plan: Plan) -> str:
    lines = [f"{len(plan.steps)} action(s):"]
    for step in plan.steps:
        lines.append(f"  {for_log(step.describe())}")
        lines.extend(f"    clears {for_log(f)}" for f in plan.clears[step])
    if plan.manual:
        lines.append(f"{len(plan.manual)} not fixable automatically:")
        lines.extend(f"  {for_log(f)}: {for_log(why)}" for f, why in plan.manual)
    return "\n".join(lines) + "\n"


def _tell_manual(plan: Plan) -> None:
    for finding, why in plan.manual:
        stderr.line(f"imagelint fix: not fixable automatically: {finding}: {why}")


def _tell_remaining(report: Report) -> None:
    for finding in report.failing_findings:
        stderr.line(f"imagelint fix: still failing after the fix: {finding.rule_id} {finding.location}")
