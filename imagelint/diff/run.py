"""Running a diff: rules and config loaded once, both sides read, changes judged by the policy."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from imagelint.diff.compare import compare
from imagelint.diff.result import ORDER, DiffResult
from imagelint.diff.sides import load_side
from imagelint.report.diff_verdict import IGNORE, change_action, decide_diff

if TYPE_CHECKING:
    from imagelint.openers import OpenOptions


def run_diff(
    old: Path,
    new: Path,
    config_path: Path | None,
    extra_rules: list[Path],
    *,
    builtin: bool = True,
    opening: OpenOptions | None = None,
) -> DiffResult:
    from imagelint.session import RunOptions, prepare

    run = prepare(RunOptions(config_path=config_path, extra_rules=extra_rules, builtin=builtin, outputs=[]))
    config = run.config
    old_side = load_side(old, run, opening)
    new_side = load_side(new, run, opening)
    changes = compare(old_side, new_side)
    for change in changes:
        change.action = change_action(change.kind, config.diff, change.unit, failing=change.failing)
    listed = [c for c in changes if c.action != IGNORE]
    listed.sort(key=lambda c: ORDER.get(c.action, 9))  # stable: the comparison's order within an action
    verdict = decide_diff([c.action for c in listed], complete=old_side.complete and new_side.complete)
    return DiffResult(old_side, new_side, listed, verdict)
