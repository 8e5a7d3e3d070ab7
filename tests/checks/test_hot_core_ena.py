"""The seed's whole chain on one host: a core saturated in the kernel (a real kernel-time load pinned
to one CPU during a real collector soak) and, in the same host's journal, an ENA reset whose NAPI
handler ran on that CPU (the driver's own words, as the kernel transport carries them into a real
journal file). IL408 names both in one finding; with the reset on another CPU, IL407 fires alone
and says no reset names the hot CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bundle.support import collect_soak_bundle
from tests.facts.journal.exportgen import Host, write_journal
from tests.soak.loads import KERNEL_LOAD, LOOSE, pinned, pinned_cpu
from tests.support import run_cli

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.serial]

NET = "ena 0000:00:05.0 eth0: "
DEV = "ena 0000:00:05.0: "


def _ena_reset(napi_cpu: int) -> list[str]:
    """One reset as driver 2.17.0 logs it: queue 2 starved, its NAPI handler on ``napi_cpu``."""
    return [
        NET + "[1/2] 3 new missed TX completions, qid: 2, 6100 msecs since interrupt, 6100 msecs since napi, "
        "napi scheduled: 1",
        NET + "[2/2] qid: 2, highest TX completion pending time (msec): 6100, napi sched changes: 0, "
        f"napi CPU: {napi_cpu}",
        NET + "Resetting the device",
        NET + "Trigger reset is on",
        DEV + "Device reset completed, status: 0, Driver info: Elastic Network Adapter (ENA) v2.17.0g",
    ]


def _soak_with_journal(tmp_path: Path, hot_cpu: int, napi_cpu: int) -> dict:
    work = tmp_path / "collect"
    host = Host(7)
    host.new_boot(1_736_000_000_000_000)
    export = bytearray()
    for line in _ena_reset(napi_cpu):
        host.at(host.mono + 200_000)
        export += host.kernel(line)
    write_journal(bytes(export), work / "root/var/log/journal")
    with pinned(KERNEL_LOAD, hot_cpu):
        bundle = collect_soak_bundle(work, seconds=15, interval=1)
    config = tmp_path / "imagelint.yaml"
    only_ena = {**LOOSE, "evidence": {"ena_reset": True}}  # dying memcgs of a shared machine do not count
    config.write_text(json.dumps({"parameters": {"IL407": only_ena, "IL408": only_ena}}))
    out = tmp_path / "soak.json"
    proc = run_cli("soak", "--from-bundle", str(bundle), "-c", str(config), "-f", f"json:{out}")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    return json.loads(out.read_text())


def _findings(report: dict, rule_id: str) -> list[dict]:
    return [f for f in report["findings"] if f["rule_id"] == rule_id]


def test_an_ena_reset_on_the_hot_cpu_is_one_finding_naming_both(tmp_path: Path) -> None:
    cpu = pinned_cpu()
    report = _soak_with_journal(tmp_path, cpu, napi_cpu=cpu)
    [finding] = _findings(report, "IL408")
    assert f"cpu{cpu}" in finding["evidence"]["cpus"].split(", ")
    expected = f"ENA 0000:00:05.0 reset with queue(s) 2 on NAPI CPU(s) cpu{cpu}"
    assert finding["evidence"]["ena"] == expected and expected in finding["message"]
    assert _findings(report, "IL407") == []  # one hot core, one finding


def test_an_ena_reset_on_another_cpu_leaves_the_hot_core_alone(tmp_path: Path) -> None:
    cpu = pinned_cpu()
    report = _soak_with_journal(tmp_path, cpu, napi_cpu=cpu + 1)
    [finding] = _findings(report, "IL407")
    assert finding["evidence"]["ena"] == "no ENA reset in the journal names a hot CPU as its NAPI CPU"
    assert _findings(report, "IL408") == []
