"""The soak's symptoms as the real collector records them (per-CPU time from /proc/stat, the
memory.stat walk during the soak, the NIC queues' interrupts, its own cost), read back at home into
the same facts the local soak has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bundle.support import collect_soak_bundle, members, pack
from tests.soak.loads import KERNEL_LOAD, USER_LOAD, pinned, sampler_first, two_cpus
from tests.support import need, run_cli


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need(Path("/proc/cgroups").is_file(), "no /proc/cgroups")
    return collect_soak_bundle(tmp_path_factory.mktemp("collect"), seconds=3, interval=0.25)


# Restart counters are not what these tests are about, and on a machine without systemd as PID 1
# they are not read: IL405 would make every soak inconclusive there.
NOT_RESTARTS = ("--ignore", "IL405")


def _soak(bundle: Path, out: Path) -> dict:
    proc = run_cli("soak", "--from-bundle", str(bundle), *NOT_RESTARTS, "-f", f"json:{out}")
    assert proc.returncode in (0, 1) and proc.stderr == "", proc.stderr
    return json.loads(out.read_text())["facts"]["soak"]


def test_the_collector_reads_per_cpu_time_ten_times_a_second(bundle: Path, tmp_path: Path) -> None:
    cpu = _soak(bundle, tmp_path / "r.json")["cpu"]
    assert cpu["period"] == 0.1 and cpu["reads"] >= 15, cpu  # ~30 in 3 s, fewer on a loaded machine
    assert cpu["online_at_start"] == [f"cpu{c}" for c in sorted(_online())]
    assert 0 < cpu["cpu_ms_per_read"] < 20, cpu  # the reader's own cost, measured on the instance
    assert set(cpu["series"]["kernel_share"]) == set(cpu["online_at_start"])


def test_the_walk_is_timed_during_the_soak_and_masks_its_intervals(bundle: Path, tmp_path: Path) -> None:
    soak = _soak(bundle, tmp_path / "r.json")
    walks = soak["memory_stat_walk"]["series"]
    taken = len(soak["samples"])
    assert len(walks["times"]) == 2 + (taken - 1) // 5, (walks, taken)  # start, every 5th sample, end
    assert walks["times"][0] == 0 and walks["times"] == sorted(walks["times"])
    assert soak["cpu"]["masked_intervals"] >= 1  # a walk's own kernel time is not judged


def test_the_collector_cost_is_recorded(bundle: Path, tmp_path: Path) -> None:
    soak = _soak(bundle, tmp_path / "r.json")
    assert 0 < soak["sampler_cpu_seconds"] < soak["elapsed"], soak["sampler_cpu_seconds"]


def test_nic_interrupts_are_read_where_the_host_has_a_nic(bundle: Path, tmp_path: Path) -> None:
    need(any(Path(p, "device").exists() for p in Path("/sys/class/net").iterdir()), "no NIC with a device")
    records = {m.name: data for m, data in members(bundle)}
    nics = records["imagelint/soak/nics"].decode()
    assert nics.startswith("nic ") and records["imagelint/soak/interrupts.end"].startswith(b" ")


def test_a_bundle_of_an_older_collector_is_inconclusive_on_per_cpu_time(bundle: Path, tmp_path: Path) -> None:
    older = [(m, d) for m, d in members(bundle) if not m.name.startswith("imagelint/soak/cpu")]
    bundled = str(pack(older, tmp_path / "b.tar.gz"))
    proc = run_cli("soak", "--from-bundle", bundled, *NOT_RESTARTS, "-f", "text")
    assert proc.returncode == 3 and proc.stderr == "", proc.stderr
    said = "per-CPU time not read (the collector that made this bundle does not read /proc/stat)"
    assert (
        said in proc.stdout
        and f"ERROR IL407 could not run: /proc/stat: per-CPU time was not read: {said}" in proc.stdout
    )


def _online() -> set[int]:
    text = Path("/proc/stat").read_text()
    return {int(line.split()[0][3:]) for line in text.splitlines() if line[:3] == "cpu" and line[3].isdigit()}


def test_the_journal_window_spans_the_restart_snapshots(bundle: Path, tmp_path: Path) -> None:
    """Restarts the journal logged are counted in the soak's window, and the counters they are held
    against are read before the first sample and after the last: the window spans those reads (a
    window of the samples alone missed the restarts of the seconds after the last one)."""
    soak = _soak(bundle, tmp_path / "r.json")
    status = {m.name: data.decode() for m, data in members(bundle) if m.name.endswith(".status") and data}
    returned = float(status["imagelint/live/end.status"].split("returned ")[1].split()[0])
    assert soak["started_wall"] <= soak["restarts"]["start"]["wall"] < soak["samples"][0]["wall"]
    assert soak["ended_wall"] == returned > soak["restarts"]["end"]["wall"] > soak["samples"][-1]["wall"]


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.serial
def test_the_remote_soak_names_a_hot_core_beside_a_core_busy_in_user_time(tmp_path: Path) -> None:
    """Issue 49 through the collector: its /proc/stat reads are judged by the same tracker as the local
    soak's and the watch's, on the others' kernel share (default bound), whatever their user time."""
    user, kernel = two_cpus()
    with sampler_first(), pinned(USER_LOAD, user), pinned(KERNEL_LOAD, kernel):
        bundle = collect_soak_bundle(tmp_path / "collect", seconds=6, interval=1)
    config = tmp_path / "imagelint.yaml"
    loose = {"min_kernel_share": 0.75, "min_seconds": 3, "evidence": {}}  # margin below SCHED_FIFO's ~95%
    config.write_text(json.dumps({"parameters": {"IL407": loose, "IL408": loose}}))
    out = tmp_path / "soak.json"
    proc = run_cli(
        "soak", "--from-bundle", str(bundle), "-c", str(config), *NOT_RESTARTS, "-f", f"json:{out}"
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    report = json.loads(out.read_text())
    (finding,) = [f for f in report["findings"] if f["rule_id"] == "IL407"]
    assert finding["evidence"]["cpus"] == f"cpu{kernel}", finding["evidence"]
    assert finding["evidence"]["others_kernel"] <= 50 and finding["evidence"]["others_busy"] >= 75
