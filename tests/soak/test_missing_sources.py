"""``soak`` is inconclusive when a source it needs could not be read, as ``audit --live`` is: a host
that runs systemd and did not answer ``systemctl show`` is missing data, never "not applicable".
Only a host without systemd leaves the restart rules not applicable. The bundles are the real
collector's, recorded on this host; the booted case has its status record edited to say systemd
ran (a bus that timed out, a manager that refused)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bundle.support import collect_soak_bundle, rewritten
from tests.support import run_cli


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return collect_soak_bundle(tmp_path_factory.mktemp("collect"), seconds=0.6, interval=0.2)


def _booted(data: bytes) -> bytes:
    lines = [b"booted 1" if ln.startswith(b"booted ") else ln for ln in data.splitlines()]
    lines = [
        b"stderr Failed to connect to bus: Connection timed out" if ln.startswith(b"stderr ") else ln
        for ln in lines
    ]
    return b"\n".join(lines) + b"\n"


def _soak(bundle: Path) -> tuple[int, dict]:
    proc = run_cli("soak", "--from-bundle", str(bundle), "-f", "json", "--select", "IL405")
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("ends", [("start", "end"), ("end",)], ids=["both", "end-only"])
def test_restart_counters_systemd_did_not_give_are_inconclusive(
    bundle: Path, tmp_path: Path, ends: tuple[str, ...]
) -> None:
    if b"booted 1" in bundle.read_bytes():
        pytest.skip("recorded where systemd answered")  # pragma: no cover - CI hosts run no systemd
    edits = {f"imagelint/live/{n}.status": _booted for n in ends}
    code, report = _soak(rewritten(bundle, tmp_path / "booted.tar.gz", edits))
    (il405,) = [r for r in report["rules"] if r["rule_id"] == "IL405"]
    assert code == 3 and report["verdict"] == "inconclusive", report
    assert il405["outcome"] == "error" and "Connection timed out" in json.dumps(report["errors"])


def test_a_host_without_systemd_leaves_the_restart_rule_not_applicable(bundle: Path) -> None:
    _, report = _soak(bundle)
    (il405,) = [r for r in report["rules"] if r["rule_id"] == "IL405"]
    assert il405["outcome"] == "not-applicable" and "no systemd manager" in il405["reason"], il405
