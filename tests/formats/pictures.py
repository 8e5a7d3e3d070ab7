"""Reports to draw: a long soak (with a hot core and restarting units) and a fleet, built in the test.

The soak's facts have the shape :meth:`imagelint.facts.soak.SoakFacts.to_dict` writes (the charts read
nothing else); the fleet's rows the shape ``imagelint fleet`` writes into ``facts["instances"]``.
Values are made by formulas, not randomness, so snapshots are stable.
"""

from __future__ import annotations

from typing import Any

from imagelint.report import Report, Verdict
from imagelint.rulepacks import Severity

HOSTILE_UNIT = 'evil"] %%{init}%%\n`x`#35;<b>\u202e::error::x.service'


def _report(facts: dict[str, Any], kind: str, notes: list[str] | None = None) -> Report:
    return Report(
        tool_version="0.0.0",
        target={"kind": kind, "path": "/mnt/image"},
        scopes=["host", "soak"],
        started_at="2024-05-01T12:00:00+00:00",
        duration_s=0.0,
        fail_on=Severity.MEDIUM,
        verdict=Verdict.PASS,
        rule_packs=[],
        config=None,
        rules=[],
        findings=[],
        facts=facts,
        notes=notes or [],
    )


def soak_facts(samples: int = 3600, interval: float = 1.0, units: tuple[str, ...] = ()) -> dict[str, Any]:
    """An hour of samples: dying memcgs climbing in steps, live ones flat, cpu3 pinned from 1200 to 1500 s."""
    times = [i * interval for i in range(samples)]
    rows = [
        {
            "monotonic": 1000.0 + t,
            "live": 240 + (i % 7),
            "dying": 100 + 19 * (i // 10) + (50 if i == 1801 else 0),
        }
        for i, t in enumerate(times)
    ]

    def kernel(cpu: int, t: float) -> float:
        if cpu == 3 and 1200 <= t < 1500:
            return 0.97
        return round(0.02 + 0.01 * ((int(t) + cpu) % 5), 3)

    deltas = [
        {"unit": u, "restarts": 40 - 3 * n, "start": 1, "end": 41 - 3 * n, "note": None}
        for n, u in enumerate(units)
    ]
    return {
        "interval": interval,
        "samples": rows,
        "restarts": {"deltas": deltas},
        "memory_stat_walk": {
            "series": {"times": times[::5], "seconds": [0.002 + i * 1e-5 for i in range(len(times[::5]))]}
        },
        "cpu": {
            "series": {
                "every": interval,
                "times": [t + interval for t in times],
                "kernel_share": {f"cpu{c}": [kernel(c, t) for t in times] for c in range(4)},
            },
            "hot_core": {"longest": {"cpu": 3, "start": 1200.0, "seconds": 300.0}},
        },
    }


def soak_report(samples: int = 3600, units: tuple[str, ...] = ("ecs.service", "crashy.service")) -> Report:
    return _report(
        {"soak": soak_facts(samples, units=units)}, "host", notes=["soak: measured 3599 s of 3600 s"]
    )


def fleet_report(hosts: int = 100) -> Report:
    rows = [
        {
            "instance_id": f"i-{n:017x}",
            "status": "Success",
            "verdict": "fail" if n % 9 == 0 else "pass",
            "failing": (n * 7) % 13 if n % 9 == 0 else 0,
            "findings": (n * 7) % 13 + n % 4,
            "errors": 1 if n == 50 else 0,
        }
        for n in range(hosts)
    ]
    notes = [  # as imagelint fleet writes them
        f"{r['instance_id']}: {r['verdict']} ({r['failing']} failing, {r['findings']} finding(s), "
        f"{r['errors']} error(s))"
        for r in rows
    ]
    return _report({"instances": rows, "command": {"run_id": "run-1"}}, "fleet", notes)
