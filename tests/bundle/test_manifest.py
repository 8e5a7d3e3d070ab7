"""The bundle's manifest: the collector's phases, read as what the collector cost the host."""

from __future__ import annotations

import pytest

from imagelint.bundle.manifest import MAX_PHASES, parse_manifest
from imagelint.errors import ImageReadError

HEAD = b"imagelint-bundle 1\n"


def _parse(*lines: str):  # type: ignore[no-untyped-def]
    return parse_manifest([HEAD, *(f"{line}\n".encode() for line in lines)], lambda *_: None, most=10_000)


def test_phases_become_wall_and_cpu_seconds_each() -> None:
    manifest = _parse(
        "phase start 100.50 0m0.01s 0m0.00s 0m0.00s 0m0.00s",
        "phase show 101.00 0m0.01s 0m0.01s 0m0.02s 0m0.01s",
        "phase paths 103.25 0m1.50s 0m0.20s 1m0.00s 0m0.30s",
    )
    cost = manifest.to_dict()["cost"]
    assert cost == {
        "cpu_seconds": 62.0,
        "phases": [
            {"phase": "show", "seconds": 0.5, "cpu_seconds": 0.04},
            {"phase": "paths", "seconds": 2.25, "cpu_seconds": 61.95},
        ],
    }


def test_without_proc_uptime_a_phase_has_cpu_but_no_wall() -> None:
    cost = _parse(
        "phase start - 0m0.00s 0m0.00s 0m0.00s 0m0.00s", "phase tar - 0m0.10s 0m0s 0m0s 0m0s"
    ).cost()
    assert cost == {"cpu_seconds": 0.1, "phases": [{"phase": "tar", "seconds": None, "cpu_seconds": 0.1}]}


def test_an_older_collector_recorded_no_cost() -> None:
    assert _parse("tar 0").to_dict()["cost"] is None


@pytest.mark.parametrize(
    "line",
    [
        "phase Bad 1.0 0m0s 0m0s 0m0s 0m0s",
        "phase show 1.0 0m0s 0m0s",
        "phase show 1e9 0m0s 0m0s 0m0s 0m0s",
        "phase show 1.0 0mxs 0m0s 0m0s 0m0s",
        "phase show",
    ],
)
def test_a_malformed_phase_line_is_refused(line: str) -> None:
    with pytest.raises(ImageReadError):
        _parse(line)


def test_phases_are_kept_to_a_bound() -> None:
    lines = ["phase p 1.0 0m0s 0m0s 0m0s 0m0s" for _ in range(MAX_PHASES + 10)]
    assert len(_parse(*lines).phases) == MAX_PHASES
