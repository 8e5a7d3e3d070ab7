"""The Prometheus metric families of a :class:`~imagelint.watch.state.WatchState`.

Names follow the Prometheus conventions: the ``imagelint_`` prefix, counters end in ``_total``,
durations are ``_seconds``. The dying-memcg slope is per hour, as the soak reports it, and says so
in its name. Label values are bounded: ``source`` and ``signal`` are fixed sets, ``rule`` the loaded
soak rules, and ``unit`` only the services in trouble, capped (:mod:`imagelint.watch.units`), with
``imagelint_units_overflow`` counting the ones left out. A value not measured (yet, or because its
source is down) is absent rather than zero; ``imagelint_source_up`` says which.

``prometheus_client`` is imported only here, and only when metrics are made (the watch extra).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from imagelint import __version__
from imagelint.watch.state import SOURCES, WatchState

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import CollectorRegistry

OUTCOMES = ("pass", "fail", "waived", "not-applicable", "error")


def families(state: WatchState) -> Iterator[Metric]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily

    info = InfoMetricFamily("imagelint_build", "imagelint version running this watch")
    info.add_metric([], {"version": __version__})
    yield info
    up = GaugeMetricFamily(
        "imagelint_source_up", "1 if the source was read at its last period", labels=["source"]
    )
    for name in SOURCES:
        status = state.sources.get(name)
        if status is not None:
            up.add_metric([name], 1.0 if status.up else 0.0)
    yield up
    yield GaugeMetricFamily(
        "imagelint_watch_start_time_seconds", "start of the watch, Unix time", state.started_wall
    )
    yield CounterMetricFamily("imagelint_watch_passes", "passes of the watch loop", state.passes)

    if state.live is not None and state.dying is not None:
        yield GaugeMetricFamily("imagelint_memcg_live", "live memory cgroups (root included)", state.live)
        yield GaugeMetricFamily(
            "imagelint_memcg_dying", "dying memory cgroups: removed, still held by the kernel", state.dying
        )
    yield GaugeMetricFamily(
        "imagelint_memcg_window_samples", "samples in the trend window", state.window_samples
    )
    yield GaugeMetricFamily(
        "imagelint_memcg_window_seconds", "time covered by the trend window", state.window_seconds
    )
    if state.trend is not None:
        yield GaugeMetricFamily(
            "imagelint_memcg_dying_slope_per_hour",
            "growth of dying memory cgroups over the window (Theil-Sen), per hour",
            state.trend.slope_per_hour,
        )
        yield GaugeMetricFamily(
            "imagelint_memcg_dying_slope_p_value",
            "Mann-Kendall two-sided p-value of that trend (small: a real trend)",
            state.trend.p_value,
        )
    if state.walk_seconds is not None:
        yield GaugeMetricFamily(
            "imagelint_memory_stat_walk_seconds",
            "wall time of the last read of every memory cgroup's memory.stat (what kubelet does)",
            state.walk_seconds,
        )
    if state.walk_cgroups is not None:
        yield GaugeMetricFamily(
            "imagelint_memory_stat_walk_cgroups", "memory cgroups read by the last walk", state.walk_cgroups
        )

    yield from _units(state)
    yield from _journal(state)
    yield from _verdicts(state)
    yield from _cpu(state)


def _units(state: WatchState) -> Iterator[Metric]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    restarts = CounterMetricFamily(
        "imagelint_unit_restarts",
        "systemd NRestarts of services in trouble (failed or restarting)",
        labels=["unit"],
    )
    active = GaugeMetricFamily(
        "imagelint_unit_state",
        "1 for the unit's current ActiveState/SubState",
        labels=["unit", "state", "sub_state"],
    )
    looping = GaugeMetricFamily(
        "imagelint_unit_restart_loop", "1 if the unit is in a restart loop within the window", labels=["unit"]
    )
    for u in state.units:
        restarts.add_metric([u.unit], u.n_restarts)
        active.add_metric([u.unit, u.active_state, u.sub_state], 1.0)
        looping.add_metric([u.unit], 1.0 if u.restart_loop else 0.0)
    yield restarts
    yield active
    yield looping
    if state.sources.get("systemd") and state.sources["systemd"].up:
        yield from _unlabelled(
            (GaugeMetricFamily, "imagelint_units_loaded", "services systemd reported", state.units_loaded),
            (GaugeMetricFamily, "imagelint_units_looping", "services in a restart loop", state.units_looping),
            (
                GaugeMetricFamily,
                "imagelint_units_overflow",
                "services in trouble not labelled because of the cap",
                state.units_overflow,
            ),
        )


def _journal(state: WatchState) -> Iterator[Metric]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    signals = CounterMetricFamily(
        "imagelint_journal_signals", "kernel symptoms logged while watching, by signal", labels=["signal"]
    )
    for name, count in sorted(state.signals.items()):
        signals.add_metric([name], count)
    yield signals
    yield from _unlabelled(
        (
            CounterMetricFamily,
            "imagelint_journal_entries",
            "journal entries read while watching",
            state.journal_entries,
        ),
        (
            CounterMetricFamily,
            "imagelint_journal_bad_entries",
            "journal entries that could not be read or matched",
            state.journal_bad_entries,
        ),
        (GaugeMetricFamily, "imagelint_journal_files", "journal files followed", state.journal_files),
        (
            GaugeMetricFamily,
            "imagelint_journal_files_unreadable",
            "journal files that could not be opened or read",
            state.journal_unreadable,
        ),
    )


def _unlabelled(*rows: tuple[Any, str, str, float]) -> Iterator[Metric]:
    """One metric without labels per (family, name, help, value)."""
    for family, name, text, value in rows:
        yield family(name, text, value)


def _verdicts(state: WatchState) -> Iterator[Metric]:
    from prometheus_client.core import GaugeMetricFamily

    verdict = GaugeMetricFamily(
        "imagelint_verdict",
        "1 for each soak rule's outcome over the window",
        labels=["rule", "name", "outcome"],
    )
    for r in state.verdicts:
        for outcome in OUTCOMES:
            verdict.add_metric([r.rule_id, r.name, outcome], 1.0 if r.outcome == outcome else 0.0)
    yield verdict


def _cpu(state: WatchState) -> Iterator[Metric]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    if state.cpu is None:
        return
    seconds = CounterMetricFamily(
        "imagelint_cpu_saturated_seconds",
        "time each CPU spent saturated since the watch started",
        labels=["cpu"],
    )
    for cpu, value in sorted(state.cpu.saturated_seconds.items()):
        seconds.add_metric([cpu], value)
    yield seconds
    yield GaugeMetricFamily(
        "imagelint_cpu_saturation_longest_episode_seconds",
        "longest episode of one CPU saturated in the kernel (others idle) within the window",
        state.cpu.longest_episode_seconds,
    )


class StateCollector:
    """A ``prometheus_client`` collector rendering whatever state ``current`` returns at scrape time."""

    def __init__(self, current: Callable[[], WatchState]) -> None:
        self.current = current

    def collect(self) -> Iterator[Metric]:
        return families(self.current())


def registry(current: Callable[[], WatchState], *, process: bool) -> CollectorRegistry:
    """A registry with the watch's families; ``process`` adds the process_* metrics (not for a textfile,
    where they would clash with node_exporter's own)."""
    from prometheus_client import CollectorRegistry, ProcessCollector

    reg = CollectorRegistry(auto_describe=False)
    reg.register(StateCollector(current))
    if process:
        ProcessCollector(registry=reg)
    return reg


def exposition(reg: CollectorRegistry) -> bytes:
    from prometheus_client import generate_latest

    return generate_latest(reg)
