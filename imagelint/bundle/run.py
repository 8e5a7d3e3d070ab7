"""A bundle opened for a run: its tree as a target, and what the collector recorded beside it (the
live state, so the host scope applies as ``audit --live`` on the instance would; the soak). The
session runs the engine on it (through :mod:`imagelint.openers`, ``session.soak_bundle`` and
``session.bundle_reports``) for ``audit BUNDLE``, ``soak --from-bundle`` and ``ami`` / ``fleet``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from imagelint.bundle import probes, symptoms
from imagelint.bundle.extract import Extracted, extract
from imagelint.bundle.numbers import count
from imagelint.bundle.target import BundleTarget
from imagelint.facts.soak import SoakFacts
from imagelint.facts.systemd.live import LiveState
from imagelint.records import dataclass
from imagelint.report import Report, ReportError
from imagelint.rulepacks import Scope

MAX_SOAK_CS = 100 * 86400 * 365  # a year of soak, in centiseconds


@dataclass
class OpenedBundle:
    """A bundle opened as a target, with what the collector recorded beside the files: the live
    state (``systemctl show``, so the host scope applies as in ``audit --live``) and the soak."""

    extracted: Extracted
    target: BundleTarget

    @property
    def live(self) -> LiveState | None:
        return probes.live_state(self.extracted.meta)

    @property
    def scopes(self) -> tuple[Scope, ...]:
        return (Scope.IMAGE, Scope.HOST) if self.live is not None else (Scope.IMAGE,)

    @property
    def sources(self) -> tuple[object, ...]:
        live = self.live
        return (live,) if live is not None else ()

    def annotate(self, report: Report) -> Report:
        """What the audit report says of the bundle itself: its manifest, names not collected."""
        report.facts["bundle"] = self.extracted.manifest.to_dict()
        if self.extracted.manifest.unrepresentable:
            report.warnings.append(
                ReportError(
                    f"{self.extracted.manifest.unrepresentable} name(s) with a newline were not collected",
                    where=self.target.description,
                )
            )
        return report

    def soak_facts(self) -> SoakFacts | None:
        """The soak the collector recorded, as the local soak's facts; None without one."""
        meta = self.extracted.meta
        recorded = self.extracted.manifest.values.get("soak")
        if not recorded:
            return None
        duration_cs, _, every_cs = recorded.partition(" ")
        where = "imagelint/manifest.txt"
        duration = count(duration_cs, where, "soak duration (cs)", most=MAX_SOAK_CS) / 100
        every = count(every_cs, where, "soak interval (cs)", least=1, most=MAX_SOAK_CS) / 100
        layout = probes.layout(meta)
        result = probes.soak_result(meta, layout, duration, every)
        start, end = probes.probe(meta, "start", layout), probes.probe(meta, "end", layout)
        during = {name: probes.probe(meta, name, layout) for _, name in symptoms.walk_names(meta)}
        result.walks = symptoms.walks_during(meta, result.samples, during)
        result.sampler_cpu_seconds = symptoms.collector_cpu(meta)
        spans = [symptoms.walk_span(meta, name) for name in ("start", *during, "end")]
        cpu, cpu_note = symptoms.cpu_record(meta, [s for s in spans if s is not None])
        interrupts = symptoms.nic_interrupts_of(meta)
        return SoakFacts(result, layout, start, end, cpu=cpu, cpu_note=cpu_note, nic_interrupts=interrupts)


@contextlib.contextmanager
def opened(path: Path, description: str | None = None) -> Iterator[OpenedBundle]:
    """The bundle at ``path``, described as ``description`` (where it came from) or its path."""
    extracted = extract(path)
    try:
        yield OpenedBundle(extracted, BundleTarget(extracted, description or str(path)))
    finally:
        extracted.cleanup()
