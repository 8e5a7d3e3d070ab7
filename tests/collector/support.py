"""Running the real collector script on a local tree, as the instance would (``sh collect.sh DIR``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from imagelint.collector import script_text
from imagelint.collector.plan import Limits, Plan, needs_for
from imagelint.config import Config
from imagelint.engine import RunSettings, audit
from imagelint.report import Report
from imagelint.rulepacks import RulePack, Scope, builtin_pack_paths, load_packs
from imagelint.targets import RootfsTarget

PACKS = load_packs([], builtin=builtin_pack_paths())
DEFAULT_LIMITS = Limits()


def collect(
    root: Path,
    workdir: Path,
    *,
    packs: list[RulePack] = PACKS,
    config: Config | None = None,
    limits: Limits = DEFAULT_LIMITS,
    env: dict[str, str] | None = None,
) -> Path:
    """The bundle the collector makes of ``root`` for these packs (no systemctl, no soak)."""
    config = config or Config()
    plan = Plan(needs_for(packs, config, (Scope.IMAGE,)), show=False, limits=limits, root=str(root))
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "collect.sh").write_text(script_text())
    (workdir / "plan.txt").write_text(plan.text())
    proc = subprocess.run(
        ["sh", str(workdir / "collect.sh"), str(workdir)],
        capture_output=True,
        text=True,
        env=env if env is not None else dict(os.environ),
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip().splitlines()[-1])


def directory_report(root: Path, config: Config | None = None, packs: list[RulePack] = PACKS) -> Report:
    return audit(RootfsTarget(root), packs, config or Config(), RunSettings())


def bundle_report(bundle: Path, config: Config | None = None, packs: list[RulePack] = PACKS) -> Report:
    from imagelint.openers import OpenOptions, open_spec
    from imagelint.session import PreparedRun, RunOptions, audit_opened

    run = PreparedRun(RunOptions(outputs=[]), tuple(packs), config or Config())
    # the rules' example trees are partial on purpose, and directory_report does not ask for the marks
    with open_spec(str(bundle), OpenOptions(partial_root=True)) as opened:
        return audit_opened(run, opened)


def findings(report: Report) -> set[tuple[object, ...]]:
    return {(f.rule_id, f.subject, f.path, f.line, f.message) for f in report.findings}


def outcomes(report: Report) -> dict[str, str]:
    return {r.rule_id: r.outcome.value for r in report.rules}
