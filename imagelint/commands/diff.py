"""``imagelint diff OLD NEW``: the rules and config prepared once, both sides read, the changes judged.

Each side is a JSON report file (read back by :mod:`imagelint.report.reading`: capped, schema-checked)
or any image the openers open (a directory, a disk image, ``ebs:snap-…``, a bundle), audited now with
the run's rules and config, so that both sides carry findings as well as an inventory. A report
without an inventory (written before inventories existed, or by a soak) cannot be compared: exit 3,
naming it. Both sides are opened with one ``shared`` mapping, so an opener can hand what it read of
OLD to NEW's (an EBS snapshot's blocks: NEW is then read through ListChangedBlocks, and each side's
``blocks`` say what was fetched and reused). The audit of an image its opener names for good (an EBS
snapshot) is kept in :mod:`imagelint.diff.cache` under that name, the imagelint version and the
run's rule packs and config, and read back instead of reading the image again (``source: cache``).
The policy (the config's ``diff:`` section) says what each change does, and
:func:`imagelint.diff.verdict.decide_diff` decides the exit code once. Two AMIs (``ami-…``,
``region:ami-…``) are diffed volume by volume (:mod:`imagelint.commands.diff_ami`), into one result.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from imagelint import __version__, stderr
from imagelint.commands.diff_ami import ami_changes, is_ami
from imagelint.diff.cache import AuditCache
from imagelint.diff.compare import Side, compare
from imagelint.diff.result import ORDER, DiffResult
from imagelint.diff.verdict import IGNORE, change_action, decide_diff
from imagelint.errors import TargetError, UsageError
from imagelint.openers import OpenOptions, immutable_key, note_cached, open_spec
from imagelint.report.model import Report, Verdict, report_from_dict
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
    cache = AuditCache()
    volumes = None
    if is_ami(str(old)) and is_ami(str(new)):
        old_side, new_side, changes, volumes = ami_changes(
            str(old), str(new), run, opening or OpenOptions(), cache, load_side
        )
    elif is_ami(str(old)) or is_ami(str(new)):
        raise UsageError(f"{old} and {new}: an AMI is diffed against an AMI (ami-… or region:ami-…)")
    else:
        shared: dict[str, Any] = {}
        old_side = load_side(old, run, replace(opening or OpenOptions(), side="old", shared=shared), cache)
        new_side = load_side(new, run, replace(opening or OpenOptions(), side="new", shared=shared), cache)
        changes = compare(old_side, new_side)
    for change in changes:
        change.action = change_action(change.kind, run.config.diff, change.unit, failing=change.failing)
    listed = [c for c in changes if c.action != IGNORE]
    listed.sort(key=lambda c: ORDER.get(c.action, 9))  # stable: the comparison's order within an action
    verdict = decide_diff([c.action for c in listed], complete=old_side.complete and new_side.complete)
    return DiffResult(old_side, new_side, listed, verdict, volumes)


def load_side(
    argument: Path, run: PreparedRun, opening: OpenOptions | None = None, cache: AuditCache | None = None
) -> Side:
    """A report read back, or any image the openers open, audited now with the run's rules (or its
    audit with these rules kept from an earlier run, when its opener names it for good)."""
    opening = replace(opening or OpenOptions(), reports=True)
    identity = immutable_key(str(argument), opening) if cache is not None else None
    # an audit kept under --allow-partial-root never stands in for one that asks for an OS root's marks
    partial = " partial-root" if opening.partial_root else ""
    key = None if identity is None else f"{identity} {run_key(run)}{partial}"
    kept = None if key is None or cache is None else cache.get(key)
    cached = None if kept is None else _kept_report(kept)
    if kept is not None and cached is not None:
        note_cached(str(argument), opening)
        return Side(str(argument), "cache", kept["inventory"], list(cached.findings), cached.verdict.value)
    with open_spec(str(argument), opening) as opened:
        if opened.report is not None:
            return _from_report(argument, *opened.report)
        report = audit_opened(run, opened)
    if report.inventory is None:  # pragma: no cover - every image-scope audit has one
        raise TargetError("the audit produced no inventory", where=str(argument))
    complete = report.verdict != Verdict.INCONCLUSIVE and report.inventory.get("complete")
    if key is not None and cache is not None and complete:
        try:
            cache.put(key, report.to_dict())
        except OSError as exc:
            stderr.warning(f"audit cache {cache.directory}: not written ({exc.strerror or exc}); going on")
    blocks = report.facts.get("snapshot", {}).get("blocks")
    return Side(
        str(argument), "image", report.inventory, list(report.findings), report.verdict.value, blocks=blocks
    )


def _kept_report(kept: dict[str, Any]) -> Report | None:
    """A kept audit read back; None (a miss: the image is read) when it does not read as one."""
    try:
        report = report_from_dict(kept)
    except Exception:  # a kept audit is a hint, never a reason to fail
        return None
    return report if isinstance(kept.get("inventory"), dict) else None


def run_key(run: PreparedRun) -> str:
    """What an audit's answers depend on besides the image: the imagelint version, the rule packs and
    the config (and the day, when waivers with an expiry date are in it)."""
    digest = hashlib.sha256(__version__.encode())
    for part in (*(pack.sha256 for pack in run.packs), run.config.sha256 or "no config"):
        digest.update(b"\0" + part.encode())
    if run.config.waivers:
        digest.update(datetime.now(UTC).date().isoformat().encode())
    return digest.hexdigest()


def _from_report(path: Path, data: dict[str, Any], sha256: str) -> Side:
    if not data.get("inventory"):
        raise TargetError(
            "the report has no inventory (written by an older imagelint, or not by an image audit)",
            where=str(path),
        )
    report = report_from_dict(data)
    return Side(str(path), "report", data["inventory"], list(report.findings), report.verdict.value, sha256)
