"""Running the engine on a bundle: the audit (image scope, plus the host scope when the bundle
holds ``systemctl show`` output, as ``audit --live`` on the instance would) and, when the bundle
holds cgroup samples, the soak. Used by ``imagelint audit BUNDLE``, ``imagelint soak
--from-bundle BUNDLE`` and by ``imagelint ami`` / ``fleet`` on what their instances uploaded."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from imagelint.bundle import probes
from imagelint.bundle.extract import Extracted, extract
from imagelint.bundle.numbers import count
from imagelint.config import Config
from imagelint.engine import RunSettings, audit
from imagelint.report import Report, ReportError
from imagelint.rulepacks import RulePack, Scope
from imagelint.targets.bundle import BundleTarget

MAX_SOAK_CS = 100 * 86400 * 365  # a year of soak, in centiseconds


def is_bundle(path: Path) -> bool:
    """A file whose content is a bundle (a gzip stream, or a tar archive: ``ustar`` at byte 257).
    Any other file given where an image root is expected is a disk image; a directory is a tree."""
    if not path.is_file():
        return False
    try:
        with path.open("rb") as f:
            head = f.read(512)
    except OSError:
        return False
    return head[:2] == b"\x1f\x8b" or head[257:262] == b"ustar"


@contextlib.contextmanager
def opened(path: Path) -> Iterator[tuple[Extracted, BundleTarget]]:
    extracted = extract(path)
    try:
        yield extracted, BundleTarget(extracted, str(path))
    finally:
        extracted.cleanup()


def _audit(extracted: Extracted, target: BundleTarget, packs: list[RulePack], config: Config) -> Report:
    live = probes.live_state(extracted.meta)
    from imagelint.facts.journal import JournalRequest

    journal = JournalRequest(required=config.require_journal)
    settings = RunSettings(
        scopes=(Scope.IMAGE, Scope.HOST) if live is not None else (Scope.IMAGE,),
        sources=(journal, live) if live is not None else (journal,),
    )
    report = audit(target, packs, config, settings)
    report.facts["bundle"] = extracted.manifest.to_dict()
    if extracted.manifest.unrepresentable:
        report.warnings.append(
            ReportError(
                f"{extracted.manifest.unrepresentable} name(s) with a newline were not collected",
                where=target.description,
            )
        )
    return report


def _soak(extracted: Extracted, target: BundleTarget, packs: list[RulePack], config: Config) -> Report | None:
    from imagelint.facts.soak import SoakFacts
    from imagelint.soak.command import judge_soak

    recorded = extracted.manifest.values.get("soak")
    if not recorded:
        return None
    duration_cs, _, every_cs = recorded.partition(" ")
    where = "imagelint/manifest.txt"
    duration = count(duration_cs, where, "soak duration (cs)", most=MAX_SOAK_CS) / 100
    every = count(every_cs, where, "soak interval (cs)", least=1, most=MAX_SOAK_CS) / 100
    with tempfile.TemporaryDirectory(prefix="imagelint-layout-") as scratch:
        layout = probes.layout(extracted.meta, Path(scratch))
    result = probes.soak_result(extracted.meta, layout, duration, every)
    facts = SoakFacts(
        result,
        layout,
        probes.probe(extracted.meta, "start", layout),
        probes.probe(extracted.meta, "end", layout),
    )
    return judge_soak(target, packs, config, facts)


def bundle_reports(path: Path, packs: list[RulePack], config: Config) -> list[tuple[str, Report]]:
    """("audit", report) and, with soak samples, ("soak", report): the parts a remote run merges."""
    with opened(path) as (extracted, target):
        parts = [("audit", _audit(extracted, target, packs, config))]
        soaked = _soak(extracted, target, packs, config)
        if soaked is not None:
            parts.append(("soak", soaked))
        return parts


def audit_bundle(path: Path, packs: list[RulePack], config: Config) -> Report:
    with opened(path) as (extracted, target):
        return _audit(extracted, target, packs, config)


def soak_bundle(path: Path, packs: list[RulePack], config: Config) -> Report:
    from imagelint.errors import UsageError

    with opened(path) as (extracted, target):
        report = _soak(extracted, target, packs, config)
    if report is None:
        raise UsageError(
            "the bundle holds no soak samples (it was collected without a soak)", where=str(path)
        )
    return report
