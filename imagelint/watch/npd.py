"""node-problem-detector custom plugin mode: one check per invocation, one line out, exit 0/1/2.

NPD's custom plugin monitor runs a command every ``invoke_interval`` and reads its exit code (0: OK,
1: NonOK, the problem is there; 2: Unknown) and the first line of its stdout (truncated by NPD at
``max_output_length``; here it is bounded to ``MAX_MESSAGE`` too). See
``deploy/node-problem-detector/imagelint-monitor.json`` for the conditions it sets.

A trend needs more than one sample, and each invocation takes one: the samples (and restart counters)
of earlier invocations are kept in a small JSON state file (``--npd-state``), bounded by age and
count, replaced atomically. Checks:

- ``dying-memcg-growth``: the dying memcg count of this invocation joins the window; a problem when
  the Theil–Sen slope over it is significant (Mann–Kendall, p < alpha) and at least
  ``min_slope_per_hour`` (default 30/hour, as rule IL401). Fewer than 3 samples: Unknown.
- ``unit-restart-loop``: a problem when a service restarted ``loop_restarts`` times or more within the
  window (NRestarts from one batched ``systemctl show``, compared with earlier invocations), or is
  waiting to auto-restart. No systemd: Unknown.
- ``nic-resets``: a problem when the journal logged an ENA reset, an ENA Tx timeout or a NETDEV
  WATCHDOG within the window (the journal's index does the lookup). No readable journal: Unknown.
"""

from __future__ import annotations

import json
import os
import time
from enum import IntEnum
from typing import Any

from imagelint.errors import ImageLintError
from imagelint.facts.cgroups import CgroupReadError
from imagelint.facts.trend import DEFAULT_ALPHA, analyse
from imagelint.probes.cgroups import CgroupSampler
from imagelint.probes.systemd import collect_live_state
from imagelint.records import dataclass
from imagelint.report.escape import visible
from imagelint.watch.textfile import write_atomically

MAX_MESSAGE = 80
MAX_STATE_SAMPLES = 360
NIC_SIGNALS = ("ena-reset", "ena-tx-timeout", "netdev-watchdog")
CHECKS = ("dying-memcg-growth", "unit-restart-loop", "nic-resets")


class NpdStatus(IntEnum):
    OK = 0
    PROBLEM = 1
    UNKNOWN = 2


@dataclass(frozen=True)
class NpdSettings:
    state_path: str | None = None
    window: float = 3600.0
    min_slope_per_hour: float = 30.0
    loop_restarts: int = 3
    alpha: float = DEFAULT_ALPHA
    proc_root: str = "/proc"
    cgroup_root: str = "/sys/fs/cgroup"
    journal_dir: str = "/var/log/journal"
    systemctl: str = "systemctl"


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """A message NPD can show: control characters made visible, one line, at most ``limit`` characters."""
    line = visible(" ".join(text.split()))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _load(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}  # first run, or a damaged file: start the window over
    return data if isinstance(data, dict) else {}


def _save(path: str | None, data: dict[str, Any]) -> None:
    if path is None:
        return
    directory, name = os.path.split(os.path.abspath(path))
    write_atomically(directory, json.dumps(data, separators=(",", ":")).encode(), name)


def check_dying_growth(settings: NpdSettings, now: float) -> tuple[NpdStatus, str]:
    try:
        sample = CgroupSampler(settings.proc_root, settings.cgroup_root, subtree_depth=0).sample()
    except CgroupReadError as exc:
        return NpdStatus.UNKNOWN, f"cannot count memory cgroups: {exc}"
    if sample.dying is None or sample.live is None:
        return NpdStatus.UNKNOWN, f"no memory cgroup counts: {sample.layout.note}"
    state = _load(settings.state_path)
    raw = state.get("dying")
    points = [p for p in raw if isinstance(p, list) and len(p) == 2] if isinstance(raw, list) else []
    points = [p for p in points if now - settings.window <= p[0] < now][-(MAX_STATE_SAMPLES - 1) :]
    points.append([now, sample.dying])
    state["dying"] = points
    _save(settings.state_path, state)
    counts = f"dying memcgs {sample.dying:,} (live {sample.live:,})"
    if len(points) < 3:
        return NpdStatus.UNKNOWN, f"{counts}; collecting samples ({len(points)} of 3)"
    t0 = points[0][0]
    trend = analyse([p[0] - t0 for p in points], [float(p[1]) for p in points], alpha=settings.alpha)
    text = f"{counts}, {trend.slope_per_hour:+,.0f}/h (p={trend.p_value:.2g})"
    if trend.growing and trend.slope_per_hour >= settings.min_slope_per_hour:
        return NpdStatus.PROBLEM, text
    return NpdStatus.OK, text


def check_restart_loop(settings: NpdSettings, now: float) -> tuple[NpdStatus, str]:
    live = collect_live_state(systemctl=settings.systemctl)
    if not live.available:
        return NpdStatus.UNKNOWN, f"cannot read unit state: {live.reason}"
    state = _load(settings.state_path)
    raw = state.get("units")
    history: dict[str, Any] = raw if isinstance(raw, dict) else {}
    kept: dict[str, list[list[float]]] = {}
    looping: list[tuple[int, str]] = []
    for unit in live.units.values():
        n = unit.n_restarts
        if n is None:
            continue
        past = [p for p in history.get(unit.unit, []) if isinstance(p, list) and len(p) == 2]
        past = [p for p in past if now - settings.window <= p[0] < now and p[1] <= n]
        restarted = n - int(past[0][1]) if past else 0
        if restarted >= settings.loop_restarts or unit.sub_state == "auto-restart":
            looping.append((restarted, unit.unit))
        if n > 0:  # only units that ever restarted are remembered: the state stays small
            kept[unit.unit] = [*past[-(MAX_STATE_SAMPLES - 1) :], [now, n]]
    state["units"] = kept
    _save(settings.state_path, state)
    if not looping:
        return NpdStatus.OK, f"no restart loop among {len(live.units)} services"
    looping.sort(key=lambda item: (-item[0], item[1]))
    restarted, name = looping[0]
    more = f" and {len(looping) - 1} more" if len(looping) > 1 else ""
    return NpdStatus.PROBLEM, f"{name} restarted {restarted} times in the window{more}"


def check_nic_resets(settings: NpdSettings, now: float) -> tuple[NpdStatus, str]:
    from imagelint.facts.journal import SIGNALS, count_signal, open_directory

    if not os.path.isdir(settings.journal_dir) or not os.access(settings.journal_dir, os.R_OK | os.X_OK):
        return NpdStatus.UNKNOWN, f"cannot read the journal at {settings.journal_dir}"
    since = int((now - settings.window) * 1e6)
    counts: dict[str, int] = {}
    with open_directory(settings.journal_dir) as journal:
        if journal.scan.files_found == 0:
            return NpdStatus.UNKNOWN, f"no journal files in {settings.journal_dir}"
        for name in NIC_SIGNALS:
            counts[name] = count_signal(journal, SIGNALS[name], samples=0, since_usec=since).total
    total = sum(counts.values())
    if total == 0:
        return NpdStatus.OK, "no NIC resets or transmit timeouts in the window"
    listed = ", ".join(f"{n} {name}" for name, n in counts.items() if n)
    return NpdStatus.PROBLEM, f"NIC trouble in the window: {listed}"


def run_check(name: str, settings: NpdSettings, now: float | None = None) -> tuple[NpdStatus, str]:
    """One check by name; never raises for what the host does (that is Unknown, with the reason)."""
    checks = {
        "dying-memcg-growth": check_dying_growth,
        "unit-restart-loop": check_restart_loop,
        "nic-resets": check_nic_resets,
    }
    at = time.time() if now is None else now
    try:
        return checks[name](settings, at)
    except OSError as exc:
        return NpdStatus.UNKNOWN, f"{name}: {exc.strerror or exc}"
    except ImageLintError as exc:  # the state file is a link, a FIFO, another user's...
        return NpdStatus.UNKNOWN, f"{name}: {exc}"
