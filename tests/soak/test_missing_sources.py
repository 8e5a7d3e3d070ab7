"""``soak`` is inconclusive when a source it needs could not be read, as ``audit --live`` is: a host
that runs systemd and did not answer ``systemctl show`` is missing data, never "not applicable".
Only a host without systemd leaves the restart rules not applicable. The bundles are the real
collector's, recorded on this host, with their status records edited to say what each case needs
whatever this host runs as PID 1: systemd ran and ``systemctl show`` failed (a bus that timed out),
or no systemd ran."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.bundle.support import collect_soak_bundle, rewritten
from tests.support import run_cli


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return collect_soak_bundle(tmp_path_factory.mktemp("collect"), seconds=0.6, interval=0.2)


def _status(booted: bool, rc: int, stderr: bytes = b"") -> Callable[[bytes], bytes]:
    """An edit of a ``.status`` record: ``systemctl show`` ended with ``rc`` (and ``stderr``) on a host
    that was (or was not) booted with systemd; the times stay as recorded."""

    def edit(data: bytes) -> bytes:
        told = {b"booted": b"1" if booted else b"0", b"rc": str(rc).encode(), b"stderr": stderr}
        lines = [ln for ln in data.splitlines() if ln.split(b" ", 1)[0] not in told]
        return b"\n".join([*lines, *(key + b" " + value for key, value in told.items())]) + b"\n"

    return edit


TIMED_OUT = _status(True, 1, b"Failed to connect to bus: Connection timed out")
NO_SYSTEMD = _status(
    False, 1, b"System has not been booted with systemd as init system (PID 1). Can't operate."
)
ANSWERED = _status(True, 0)
SHOWN = b"Id=ok.service\nActiveState=active\nSubState=running\nResult=success\nNRestarts=0\n"


def _soak(bundle: Path) -> tuple[int, dict]:
    proc = run_cli("soak", "--from-bundle", str(bundle), "-f", "json", "--select", "IL405")
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("ends", [("start", "end"), ("end",)], ids=["both", "end-only"])
def test_restart_counters_systemd_did_not_give_are_inconclusive(
    bundle: Path, tmp_path: Path, ends: tuple[str, ...]
) -> None:
    edits = {f"imagelint/live/{n}.status": TIMED_OUT if n in ends else ANSWERED for n in ("start", "end")}
    edits |= {f"imagelint/live/{n}.txt": lambda _: SHOWN for n in ("start", "end") if n not in ends}
    code, report = _soak(rewritten(bundle, tmp_path / "booted.tar.gz", edits))
    (il405,) = [r for r in report["rules"] if r["rule_id"] == "IL405"]
    assert code == 3 and report["verdict"] == "inconclusive", report
    assert il405["outcome"] == "error" and "Connection timed out" in json.dumps(report["errors"])


def test_a_host_without_systemd_leaves_the_restart_rule_not_applicable(bundle: Path, tmp_path: Path) -> None:
    edits = {f"imagelint/live/{n}.status": NO_SYSTEMD for n in ("start", "end")}
    _, report = _soak(rewritten(bundle, tmp_path / "unbooted.tar.gz", edits))
    (il405,) = [r for r in report["rules"] if r["rule_id"] == "IL405"]
    assert il405["outcome"] == "not-applicable" and "no systemd manager" in il405["reason"], il405
