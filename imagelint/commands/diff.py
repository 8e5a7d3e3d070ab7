"""``imagelint diff OLD NEW``: the rules and config prepared once, both sides read, the changes judged.

Each side is a JSON report file (read back by :mod:`imagelint.report.reading`: capped, schema-checked)
or any image the openers open (a directory, a disk image, ``ebs:snap-…``, a bundle), audited now with
the run's rules and config, so that both sides carry findings as well as an inventory. A report
without an inventory (written before inventories existed, or by a soak) cannot be compared: exit 3,
naming it. Both sides are opened with one ``shared`` mapping, so an opener can hand what it read of
OLD to NEW's (an EBS snapshot's blocks: NEW is then read through ListChangedBlocks, and each side's
``blocks`` say what was fetched and reused). The policy (the config's ``diff:`` section) says what
each change does, and :func:`imagelint.diff.verdict.decide_diff` decides the exit code once.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from imagelint.diff.compare import Side, compare
from imagelint.diff.result import ORDER, DiffResult
from imagelint.diff.verdict import IGNORE, change_action, decide_diff
from imagelint.errors import TargetError
from imagelint.openers import OpenOptions, open_spec
from imagelint.report.model import report_from_dict
from imagelint.session import PreparedRun, RunOptions, audit_opened, prepare


def run_diff(
    old: Path,
    new: Path,
    config_path: Path | None,
    extra_rules: list[Path],
    *,
    builtin: bool = True,
    opening: OpenOptions | None = None,
) -> DiffResult:
    run = prepare(RunOptions(config_path=config_path, extra_rules=extra_rules, builtin=builtin, outputs=[]))
    config = run.config
    shared: dict[str, Any] = {}
    old_side = load_side(old, run, replace(opening or OpenOptions(), side="old", shared=shared))
    new_side = load_side(new, run, replace(opening or OpenOptions(), side="new", shared=shared))
    changes = compare(old_side, new_side)
    for change in changes:
        change.action = change_action(change.kind, config.diff, change.unit, failing=change.failing)
    listed = [c for c in changes if c.action != IGNORE]
    listed.sort(key=lambda c: ORDER.get(c.action, 9))  # stable: the comparison's order within an action
    verdict = decide_diff([c.action for c in listed], complete=old_side.complete and new_side.complete)
    return DiffResult(old_side, new_side, listed, verdict)


def load_side(argument: Path, run: PreparedRun, opening: OpenOptions | None = None) -> Side:
    """A report read back, or any image the openers open, audited now with the run's rules."""
    opening = replace(opening or OpenOptions(), reports=True)
    with open_spec(str(argument), opening) as opened:
        if opened.report is not None:
            return _from_report(argument, *opened.report)
        report = audit_opened(run, opened)
    if report.inventory is None:  # pragma: no cover - every image-scope audit has one
        raise TargetError("the audit produced no inventory", where=str(argument))
    blocks = report.facts.get("snapshot", {}).get("blocks")
    return Side(
        str(argument), "image", report.inventory, list(report.findings), report.verdict.value, blocks=blocks
    )


def _from_report(path: Path, data: dict[str, Any], sha256: str) -> Side:
    if not data.get("inventory"):
        raise TargetError(
            "the report has no inventory (written by an older imagelint, or not by an image audit)",
            where=str(path),
        )
    report = report_from_dict(data)
    return Side(str(path), "report", data["inventory"], list(report.findings), report.verdict.value, sha256)
