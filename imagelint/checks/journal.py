"""Check kinds on the journal: restart loops, start-limit hits, repeated failures, kernel symptoms,
ENA device resets (each reset counted once with the lines that led to it).

The journal is opened once per run (the image's /var/log/journal and /run/log/journal, or the
directory or file given with ``--journal``) and shared by every journal rule. Honesty about data:
no journal at all makes the rules not applicable (the normal state of a cleaned golden image)
unless the run requires one; journal files that exist but cannot be read in full are gaps that
make the run inconclusive, while what could be read still produces findings.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from imagelint.checks import register
from imagelint.checks.base import CheckContext, CheckKind, NotApplicable, Observation, PathNeed
from imagelint.checks.params import Param, ParamError, UnitSelection
from imagelint.errors import ImageReadError
from imagelint.records import dataclass

P = TypeVar("P")
Window = Annotated[float, Param("seconds", exclusiveMinimum=0)]


class _JournalKind(CheckKind[P]):
    """Every journal kind reads the image's journal directories."""

    def paths(self, params: P) -> list[PathNeed]:
        from imagelint.facts.journal.sources import IMAGE_JOURNAL_DIRS

        return [PathNeed(d, "journal") for d in IMAGE_JOURNAL_DIRS]


def journal_of(ctx: CheckContext) -> Any:
    """The run's journal (opened once), after accounting for what could not be read."""
    from imagelint.facts.journal import JournalRequest, open_image, open_path

    request = ctx.source(JournalRequest) or JournalRequest()

    def build() -> Any:
        if request.console is not None:
            from imagelint.facts.journal.console import open_console

            journal: Any = open_console(request.console)
        else:
            journal = open_path(request.path) if request.path else open_image(ctx.target)
        name = "console" if request.console is not None else "journal"

        def account() -> dict[str, object]:
            # Called once, when the report is made (the engine renders the recorded facts before it
            # takes the notes): only then has every analysis run, so the note counts what they read.
            ctx.note(f"{name}: " + journal.scan.note())
            said: dict[str, object] = journal.scan.to_dict()
            return said

        ctx.record(name, account)
        return journal

    journal = ctx.fact("journal", build)
    scan = journal.scan
    if scan.files_found == 0:
        searched = ", ".join(scan.searched) or scan.source
        if request.required:
            raise ImageReadError(
                searched, "no journal files, and this run requires a journal (--require-journal)"
            )
        raise NotApplicable(f"no journal files in {searched}")
    return journal


def journal_gaps(ctx: CheckContext, journal: Any) -> None:
    """Files present but not (fully) readable: each is a gap that keeps the run from passing."""
    for report in journal.scan.unreadable:
        ctx.gap(report.path, f"journal file {report.status}: {report.reason}")


def _restarts(ctx: CheckContext) -> Any:
    journal = journal_of(ctx)  # first: an image without a journal never loads the analyses
    from imagelint.facts.journal import analyze_restarts

    report = ctx.fact("journal.restarts", lambda: analyze_restarts(journal))
    journal_gaps(ctx, journal)
    return report


def _when(usec: int | None) -> str | None:
    if usec is None:
        return None
    return dt.datetime.fromtimestamp(usec / 1e6, dt.UTC).isoformat(timespec="seconds")


def _unit_evidence(rec: Any) -> dict[str, Any]:
    last_exit = f"{rec.last_exit.code} {rec.last_exit.status}" if rec.last_exit else None
    return {
        "boot": rec.boot_id,
        "restarts": rec.restarts,
        "max_n_restarts": rec.max_n_restarts,
        "rate_per_hour": round(rec.rate_per_hour, 1) if rec.rate_per_hour is not None else None,
        "first": _when(rec.first_usec),
        "last": _when(rec.last_usec),
        "start_limit_hits": rec.start_limit_hits,
        "failures": dict(rec.failures),
        "last_exit": last_exit,
        "samples": list(rec.samples),
    }


@dataclass(frozen=True, kw_only=True)
class RestartLoopParams(UnitSelection):
    min_restarts: Annotated[int, Param("restarts within the window that fire", minimum=1)]
    window: Window = 3600


@register
class JournalRestartLoop(_JournalKind[RestartLoopParams]):
    name = "journal.restart_loop"
    summary = "Fires per unit and boot with at least N scheduled restarts inside a sliding window."
    parameters = RestartLoopParams
    variables = {
        "restarts": "restarts in that boot",
        "in_window": "most restarts inside one window",
        "window_min": "the window in minutes",
        "rate_per_hour": "restarts per hour",
        "first": "first restart (UTC)",
        "last": "last restart (UTC)",
        "last_exit": "how the process last ended",
        "boot": "boot id",
    }

    def evaluate(self, ctx: CheckContext, params: RestartLoopParams) -> list[Observation]:
        window = params.window
        found = []
        for rec in _restarts(ctx).units:
            in_window = rec.max_restarts_within(window)
            if in_window >= params.min_restarts and params.selects(rec.unit):
                evidence = {
                    **_unit_evidence(rec),
                    "in_window": in_window,
                    "window_min": round(window / 60, 1),
                }
                found.append(Observation(f"{rec.unit}@{rec.boot_id}", unit=rec.unit, evidence=evidence))
        return found


@register
class JournalStartLimit(_JournalKind[UnitSelection]):
    name = "journal.start_limit"
    summary = "Fires per unit and boot that hit its start limit (structured result or PID 1's text)."
    parameters = UnitSelection
    variables = {"start_limit_hits": "how often", "boot": "boot id", "last": "last restart (UTC)"}

    def evaluate(self, ctx: CheckContext, params: UnitSelection) -> list[Observation]:
        return [
            Observation(f"{rec.unit}@{rec.boot_id}", unit=rec.unit, evidence=_unit_evidence(rec))
            for rec in _restarts(ctx).units
            if rec.start_limit_hits and params.selects(rec.unit)
        ]


@dataclass(frozen=True, kw_only=True)
class FailuresParams(UnitSelection):
    min_failures: Annotated[int, Param("failures in one boot at or above which it fires", minimum=1)]
    results: Annotated[tuple[str, ...], Param("only these UNIT_RESULTs")] = ()


@register
class JournalFailures(_JournalKind[FailuresParams]):
    name = "journal.failures"
    summary = "Fires per unit and boot with at least N failures (UNIT_RESULT of the unit-failed record)."
    parameters = FailuresParams
    variables = {"failures_total": "failures counted", "results": "UNIT_RESULT counts", "boot": "boot id"}

    def evaluate(self, ctx: CheckContext, params: FailuresParams) -> list[Observation]:
        wanted = set(params.results)
        found = []
        for rec in _restarts(ctx).units:
            counted = {r: n for r, n in rec.failures.items() if not wanted or r in wanted}
            total = sum(counted.values())
            if total >= params.min_failures and params.selects(rec.unit):
                evidence = {**_unit_evidence(rec), "failures_total": total, "results": counted}
                found.append(Observation(f"{rec.unit}@{rec.boot_id}", unit=rec.unit, evidence=evidence))
        return found


@dataclass(frozen=True, kw_only=True)
class SignalParams:
    signal: Annotated[str | None, Param("a built-in symptom (see patterns.SIGNALS), or give match")] = None
    match: Annotated[
        Mapping[str, str] | None, Param("FIELD: value matches, looked up through the journal's index")
    ] = None
    pattern: Annotated[str | None, Param("regex on MESSAGE (with match)")] = None
    min_count: Annotated[int, Param("occurrences within the window that fire", minimum=1)] = 1
    window: Window = 3600


@register
class JournalSignal(_JournalKind[SignalParams]):
    name = "journal.signal"
    summary = (
        "Fires per boot where a symptom (field matches + message regex) occurs at least N times in a window."
    )
    parameters = SignalParams
    variables = {
        "signal": "the symptom's name",
        "count": "occurrences in that boot",
        "in_window": "most inside one window",
        "first": "first (UTC)",
        "last": "last (UTC)",
        "sample": "one message",
        "boot": "boot id",
    }

    def validate(self, params: SignalParams) -> None:
        from imagelint import textmatch
        from imagelint.facts.journal import SIGNALS

        if (params.signal is None) == (params.match is None):
            raise ParamError([], "give exactly one of 'signal' (a built-in symptom) or 'match'")
        if params.signal is not None and params.signal not in SIGNALS:
            raise ParamError(["signal"], f"unknown signal {params.signal!r} (known: {', '.join(SIGNALS)})")
        if params.pattern is not None:
            try:
                textmatch.compile(params.pattern)
            except textmatch.PatternError as exc:
                raise ParamError(["pattern"], exc.message) from None

    def kernel_lines_only(self, params: SignalParams) -> bool:
        from imagelint.facts.journal.patterns import KERNEL

        return dict(self._spec(params).matches) == KERNEL

    @staticmethod
    def _spec(params: SignalParams) -> Any:
        from imagelint.facts.journal import SIGNALS, SignalSpec

        if params.signal is not None:
            return SIGNALS[params.signal]
        assert params.match is not None  # validate: exactly one of signal and match
        return SignalSpec("custom", dict(params.match), params.pattern)

    def evaluate(self, ctx: CheckContext, params: SignalParams) -> list[Observation]:
        journal = journal_of(ctx)  # first: an image without a journal never loads the analyses
        from imagelint.facts.journal import count_signal

        spec = self._spec(params)
        key = ("journal.signal", spec.name, repr(sorted(spec.matches.items())), spec.message)
        report = ctx.fact(key, lambda: count_signal(journal, spec))
        journal_gaps(ctx, journal)
        window, found = params.window, []
        for boot in report.boots:
            in_window = boot.max_within(window)
            if in_window >= params.min_count:
                evidence = {
                    "signal": spec.name,
                    "boot": boot.boot_id,
                    "count": boot.count,
                    "in_window": in_window,
                    "first": _when(boot.first_usec),
                    "last": _when(boot.last_usec),
                    "sample": boot.samples[0] if boot.samples else None,
                }
                found.append(Observation(f"{spec.name}@{boot.boot_id}", evidence=evidence))
        return found


def _numbers(values: set[int]) -> str:
    return ", ".join(str(v) for v in sorted(values)) or "not logged"


@dataclass(frozen=True, kw_only=True)
class EnaResetParams:
    min_resets: Annotated[
        int, Param("resets of one device in one boot at or above which it fires", minimum=1)
    ] = 1
    gap: Annotated[
        float,
        Param("seconds of silence that end an episode whose reset lines are missing", exclusiveMinimum=0),
    ] = 60


@register
class JournalEnaResets(_JournalKind[EnaResetParams]):
    name = "journal.ena_resets"
    summary = (
        "Fires per boot and ENA device with at least N resets, each reset counted once with the "
        "Tx-timeout and watchdog lines that led to it (facts.journal.ena)."
    )
    parameters = EnaResetParams
    variables = {
        "device": "the PCI address of the ENA device",
        "resets": "resets of that device in that boot",
        "completed": "how many of them logged a successful completion",
        "queues": "the I/O queues the lines name (ENA pairs a Tx and an Rx queue under one qid)",
        "napi_cpus": "the CPUs of the queues' NAPI handlers, where the driver prints them (2.17.0+)",
        "causes": (
            "what preceded the resets (tx-timeout, tx-paused, napi-starved, device-health, bad-descriptor)"
        ),
        "wordings": "the driver wordings seen (patterns.ENA_RESET_PATH: they date the driver)",
        "lines": "driver lines of those resets",
        "first": "first line (UTC)",
        "last": "last line (UTC)",
        "sample": "one line",
        "boot": "boot id",
    }

    def kernel_lines_only(self, params: EnaResetParams) -> bool:
        return True  # the kernel's ENA driver lines (_TRANSPORT=kernel) and nothing else

    def evaluate(self, ctx: CheckContext, params: EnaResetParams) -> list[Observation]:
        journal = journal_of(ctx)  # first: an image without a journal never loads the analyses
        from imagelint.facts.journal import analyze_ena_resets

        gap = params.gap
        report = ctx.fact(("journal.ena_resets", gap), lambda: analyze_ena_resets(journal, gap=gap))
        journal_gaps(ctx, journal)
        per: dict[tuple[str, str], list[Any]] = {}
        for episode in report.resets():
            per.setdefault((episode.boot_id, episode.device), []).append(episode)
        found = []
        for (boot, device), episodes in per.items():
            if len(episodes) < params.min_resets:
                continue
            causes = sorted({cause for e in episodes for cause in e.causes})
            evidence = {
                "boot": boot,
                "device": device,
                "resets": len(episodes),
                "completed": sum(e.completed for e in episodes),
                "queues": _numbers({q for e in episodes for q in e.queues}),
                "napi_cpus": _numbers({c for e in episodes for c in e.napi_cpus}),
                "causes": ", ".join(causes) or "not logged",
                "wordings": ", ".join(dict.fromkeys(w for e in episodes for w in e.wordings)),
                "lines": sum(e.lines for e in episodes),
                "first": _when(episodes[0].first_usec),
                "last": _when(episodes[-1].last_usec),
                "sample": episodes[0].samples[0],
            }
            found.append(Observation(f"ena-reset@{device}@{boot}", evidence=evidence))
        return found
