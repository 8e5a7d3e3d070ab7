"""Numbers a bundle records are parsed strictly: a real collector soak bundle, each number replaced
by what ``int()``/``float()`` would take or choke on, is one line and exit 3 naming the member."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from imagelint.bundle.numbers import count, seconds
from imagelint.errors import ImageReadError
from imagelint.facts.cpurecord import MAX_SERIES_POINTS
from imagelint.facts.hotcore import MAX_EPISODES
from tests.bundle.support import collect_soak_bundle, members, pack, rewritten
from tests.support import need, run_cli_measured

SAMPLE = "imagelint/soak/sample.00000"
SHOWN = b"Id=ecs.service\nNRestarts=0\nActiveState=active\nSubState=running\n"


@pytest.fixture(scope="module")
def soak_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need(Path("/proc/cgroups").is_file(), "no /proc/cgroups")
    return collect_soak_bundle(tmp_path_factory.mktemp("collect"))


def _line(prefix: bytes, value: str) -> Callable[[bytes], bytes]:
    """Replace the value of the first line starting with ``prefix``."""

    def edit(data: bytes) -> bytes:
        lines = data.split(b"\n")
        at = next(i for i, line in enumerate(lines) if line.startswith(prefix))
        lines[at] = prefix + value.encode()
        return b"\n".join(lines)

    return edit


def _memory_row(value: str) -> Callable[[bytes], bytes]:
    def edit(data: bytes) -> bytes:
        lines = data.split(b"\n")
        at = next(i for i, line in enumerate(lines) if line.startswith(b"memory\t"))
        cells = lines[at].split(b"\t")
        cells[2] = value.encode()
        lines[at] = b"\t".join(cells)
        return b"\n".join(lines)

    return edit


def _shown(restarts: str) -> dict[str, Callable[[bytes], bytes]]:
    return {
        "imagelint/live/start.status": _line(b"rc ", "0"),
        "imagelint/live/start.txt": lambda _: SHOWN.replace(b"NRestarts=0", f"NRestarts={restarts}".encode()),
    }


CASES = {
    "uptime-two-fields": ({SAMPLE: _line(b"uptime ", "6000 0")}, f"{SAMPLE}:1"),
    "uptime-inf": ({SAMPLE: _line(b"uptime ", "inf")}, f"{SAMPLE}:1"),
    "uptime-nan": ({SAMPLE: _line(b"uptime ", "nan")}, f"{SAMPLE}:1"),
    "uptime-negative": ({SAMPLE: _line(b"uptime ", "-5")}, f"{SAMPLE}:1"),
    "wall-huge": ({SAMPLE: _line(b"wall ", "1e400")}, f"{SAMPLE}:2"),
    "wall-arabic-digits": ({SAMPLE: _line(b"wall ", "١٧٠٠٠٠٠٠٠٠")}, f"{SAMPLE}:2"),
    "memory-row-arabic-digits": ({SAMPLE: _memory_row("٥٠")}, f"{SAMPLE}: /proc/cgroups"),
    "memory-row-underscores": ({SAMPLE: _memory_row("5_0")}, f"{SAMPLE}: /proc/cgroups"),
    "cgroup-stat-superscript": ({SAMPLE: _line(b"nr_descendants ", "²")}, f"{SAMPLE}: cgroup.stat"),
    "status-wall-nan": (
        {"imagelint/live/start.status": _line(b"wall ", "nan")},
        "imagelint/live/start.status",
    ),
    "nrestarts-superscript": (_shown("²"), "imagelint/live/start.txt"),
    "nrestarts-arabic-digits": (_shown("٣"), "imagelint/live/start.txt"),
    "layout-nul-name": ({"imagelint/soak/layout": _line(b"mounted ", "a\0b")}, "imagelint/soak/layout"),
    "layout-dot-dot": ({"imagelint/soak/layout": _line(b"mounted ", "..")}, "imagelint/soak/layout"),
    # found by benchmarks/fuzz_inputs.py (seed 2028 case 796): ENAMETOOLONG from mkdir
    "layout-long-name": ({"imagelint/soak/layout": _line(b"mounted ", "9" * 400)}, "imagelint/soak/layout"),
    "cpu-stamp-nan": ({"imagelint/soak/cpu": _line(b"t ", "nan")}, "imagelint/soak/cpu:3"),
    "cpu-column-superscript": (
        {"imagelint/soak/cpu": _line(b"cpu0 ", "1 2 ² 4 5 6 7 8 9 10")},
        "imagelint/soak/cpu:3",
    ),
    "cpu-period-zero": ({"imagelint/soak/cpu": _line(b"period ", "0")}, "imagelint/soak/cpu"),
    "nics-slash": ({"imagelint/soak/nics": lambda _: b"nic a/b virtio0 1\n"}, "imagelint/soak/nics:1"),
    "nics-irq-arabic": (
        {"imagelint/soak/nics": lambda _: b"nic eth0 virtio0 \xd9\xa3\n"},
        "imagelint/soak/nics:1",
    ),
    "walk-uptime-nan": (
        {"imagelint/soak/probe.start": _line(b"uptime-start ", "nan")},
        "imagelint/soak/probe.start",
    ),
    "cost-superscript": (
        {"imagelint/soak/cost": _line(b"times-after ", "²m0s 0m0s 0m0s 0m0s")},
        "imagelint/soak/cost",
    ),
    # issue 40: was an OverflowError packing the CPU number
    "cpu-number-past-2^63": (
        {"imagelint/soak/cpu": lambda d: d.replace(b"\ncpu0 ", b"\ncpu9223372036854775808 ")},
        "imagelint/soak/cpu:3",
    ),
    "interrupts-cpu-past-2^63": (
        {"imagelint/soak/interrupts.end": lambda d: d.replace(b"CPU0 ", b"CPU9223372036854775808 ", 1)},
        "imagelint/soak/interrupts.end:1",
    ),
    "soak-interval-zero": ({"imagelint/manifest.txt": _line(b"soak ", "20 0")}, "imagelint/manifest.txt"),
    "soak-superscript": ({"imagelint/manifest.txt": _line(b"soak ", "² 10")}, "imagelint/manifest.txt"),
}


def test_the_real_bundle_soaks(soak_bundle: Path, tmp_path: Path) -> None:
    """Read whole and judged: every sample the collector recorded is in the report, no rule is an
    error, and the exit is the verdict's. The one way this host's 0.2 s bundle is inconclusive is a
    collector that did not reach the end of its soak (a loaded host), and the report says so; a
    finding is one of the soak's rules judging what this host measured."""
    out = tmp_path / "soak.json"
    measured = run_cli_measured("soak", "--from-bundle", str(soak_bundle), "-f", f"json:{out}")
    assert measured.stderr == "", measured.stderr
    report = json.loads(out.read_text())
    soak = report["facts"]["soak"]
    recorded = [m.name for m, _ in members(soak_bundle) if m.name.startswith("imagelint/soak/sample.")]
    assert len(soak["samples"]) == len(recorded) >= 1, (len(soak["samples"]), recorded)
    _assert_judged(measured.returncode, report)


def _assert_judged(code: int | None, report: dict) -> None:
    """No rule is an error, the soak the collector ran to its end is whole (on a loaded host it skips
    slots, which is not a soak cut short), and the exit is the verdict's, findings only from the soak's
    rules."""
    assert [r["rule_id"] for r in report["rules"] if r["outcome"] == "error"] == [], report["rules"]
    assert report["facts"]["soak"]["cut_short"] is False, report["facts"]["soak"]
    assert report["errors"] == [], report["errors"]
    found = {f["rule_id"] for f in report["findings"]}
    assert code == {"pass": 0, "fail": 1}[report["verdict"]], report["verdict"]
    assert all(rule.startswith("IL4") for rule in found) and (found or report["verdict"] == "pass"), found


def _with_samples(bundle: Path, dest: Path, uptimes: list[str]) -> Path:
    """``bundle`` (a 0.2 s soak sampled every 0.1 s) with its samples replaced by copies of its first,
    taken at ``uptimes``."""
    items = [(m, d) for m, d in members(bundle) if not m.name.startswith("imagelint/soak/sample.")]
    template = next(d for m, d in members(bundle) if m.name == SAMPLE)
    assert template is not None
    for k, uptime in enumerate(uptimes):
        member = tarfile.TarInfo(f"imagelint/soak/sample.{k:05d}")
        member.mode = 0o644
        items.append((member, _line(b"uptime ", uptime)(template)))
    return pack(items, dest)


@pytest.mark.parametrize(
    ("uptimes", "cut"),
    [
        (["100.00", "100.21"], False),  # the middle slot skipped on a loaded host: the soak is whole
        (["100.00", "100.09", "100.20"], False),
        (["100.00", "100.05"], True),  # stops half way through
        (["100.00"], True),
    ],
)
def test_a_soak_is_cut_short_when_its_samples_stop_early_not_when_slots_were_skipped(
    soak_bundle: Path, tmp_path: Path, uptimes: list[str], cut: bool
) -> None:
    """The collector skips the slots a slow sample overran (as the local soak does): a bundle with
    fewer samples than slots whose last sample is at the soak's end was called cut short, so a VM
    soak under load was inconclusive though it ran to its end."""
    bundle = _with_samples(soak_bundle, tmp_path / "b.tar.gz", uptimes)
    out = tmp_path / "soak.json"
    measured = run_cli_measured("soak", "--from-bundle", str(bundle), "-f", f"json:{out}")
    report = json.loads(out.read_text())
    assert report["facts"]["soak"]["cut_short"] is cut, report["facts"]["soak"]
    if cut:
        assert (measured.returncode, report["verdict"]) == (3, "inconclusive")
        assert [e["message"].split(" after ")[0] for e in report["errors"]] == ["cut short"]
    else:
        assert report["errors"] == [], report["errors"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_number_in_a_bundle_is_one_line_naming_the_member(
    soak_bundle: Path, tmp_path: Path, case: str
) -> None:
    edits, where = CASES[case]
    bundle = rewritten(soak_bundle, tmp_path / "bundle.tar.gz", edits)
    run_cli_measured("soak", "--from-bundle", str(bundle)).assert_one_line(3, where)


def _nic_storm(rows: int, cpus: int, nics: int) -> dict[str, Callable[[bytes], bytes]]:
    """Interrupt records of ``rows`` ``ena`` queue rows over ``cpus`` CPU columns (every interface
    matches every one of them), and ``nics`` interfaces."""
    counts = " 1" * cpus
    text = "CPU" + " CPU".join(map(str, range(cpus))) + "\n"
    text += "".join(f"{irq}:{counts} ena-rx\n" for irq in range(rows))
    nic_lines = "".join(f"nic eth{i} virtio{i} 1\n" for i in range(nics))
    return {
        "imagelint/soak/interrupts.start": lambda _: text.encode(),
        "imagelint/soak/interrupts.end": lambda _: text.encode(),
        "imagelint/soak/nics": lambda _: nic_lines.encode(),
    }


@pytest.mark.parametrize(
    ("rows", "cpus", "nics"),
    [
        (60_000, 2, 16),  # 4 MiB, rows x interfaces (the issue's: 746 MB, a 100 MB report, exit 0)
        (60_000, 2, 64),  # 4 MiB, rows x interfaces (the issue's: the memory limit)
        (250, 8_000, 16),  # 4 MiB, IRQs x CPUs x interfaces summed
        (70_000, 1, 1),  # more rows than a host has
    ],
)
def test_interrupt_records_are_bounded_by_what_they_produce(
    soak_bundle: Path, tmp_path: Path, rows: int, cpus: int, nics: int
) -> None:
    bundle = rewritten(soak_bundle, tmp_path / "bundle.tar.gz", _nic_storm(rows, cpus, nics))
    report = tmp_path / "report.json"
    measured = run_cli_measured("soak", "--from-bundle", str(bundle), "-f", f"json:{report}")
    measured.assert_one_line(3, "imagelint/soak/interrupts.end")
    assert not report.exists()


def _cpu_storm(cpus: int, reads: int) -> dict[str, Callable[[bytes], bytes]]:
    """A per-CPU record of ``cpus`` x ``reads`` intervals (what the collector's cap allows), each read
    10 s after the last: each its own span of the soak's interval."""

    def record(_: bytes) -> bytes:
        lines = ["mode bash", "period 10"]
        for read in range(reads):
            v = read * 10
            lines += [f"t {1000 + read * 10}", *(f"cpu{c} {v} 0 {v} {v} 0 0 0 0 0 0" for c in range(cpus))]
        return ("\n".join(lines) + "\n").encode()

    return {"imagelint/soak/cpu": record}


def test_a_per_cpu_record_yields_a_bounded_series(soak_bundle: Path, tmp_path: Path) -> None:
    """400 CPUs x 400 reads, each in a span of its own: every point was kept (1,000 x 1,000: 391 MiB
    and a 42 MB report)."""
    bundle = rewritten(soak_bundle, tmp_path / "bundle.tar.gz", _cpu_storm(400, 400))
    report = tmp_path / "report.json"
    measured = run_cli_measured("soak", "--from-bundle", str(bundle), "-f", f"json:{report}")
    assert measured.stderr == "", measured.stderr[-2000:]
    measured.assert_within_memory()
    _assert_judged(measured.returncode, json.loads(report.read_text()))
    series = json.loads(report.read_text())["facts"]["soak"]["cpu"]["series"]
    assert len(series["times"]) * len(series["kernel_share"]) <= MAX_SERIES_POINTS
    assert series["every"] >= 10 and len(series["kernel_share"]) == 400


def test_a_cpu_flapping_every_read_is_bounded_by_its_episodes(soak_bundle: Path, tmp_path: Path) -> None:
    """One CPU saturated on every other read, reads 2 s apart: an episode per two reads. 1,200,000
    reads held 355 MiB (an object per read, an episode per two) and passed; past MAX_EPISODES the
    record is refused."""

    def record(_: bytes) -> bytes:
        lines, kernel, idle = ["mode bash", "period 10"], 0, 0
        for read in range(2 * MAX_EPISODES + 10):
            lines += [f"t {1000 + 2 * read}", f"cpu0 0 0 {kernel} {idle} 0 0 0 0 0 0"]
            kernel, idle = (kernel + 200, idle) if read % 2 else (kernel, idle + 200)
        return ("\n".join(lines) + "\n").encode()

    bundle = rewritten(soak_bundle, tmp_path / "bundle.tar.gz", {"imagelint/soak/cpu": record})
    measured = run_cli_measured("soak", "--from-bundle", str(bundle))
    measured.assert_one_line(3, "imagelint/soak/cpu", "episodes")


def test_a_missing_record_is_one_line(soak_bundle: Path, tmp_path: Path) -> None:
    items = [(m, data) for m, data in members(soak_bundle) if m.name != "imagelint/soak/layout"]
    bundle = pack(items, tmp_path / "bundle.tar.gz")
    run_cli_measured("soak", "--from-bundle", str(bundle)).assert_one_line(3, "imagelint/soak/layout")


@pytest.mark.parametrize("value", ["ExecMainStatus=٣", "NRestarts=²", "ExecMainStatus=-1"])
def test_a_bad_number_in_the_live_state_is_one_line(soak_bundle: Path, tmp_path: Path, value: str) -> None:
    """The live state of a bundle with a soak is the snapshot taken at its end."""
    edits = {
        "imagelint/live/end.status": _line(b"rc ", "0"),
        "imagelint/live/end.txt": lambda _: b"Id=a.service\nActiveState=failed\n" + value.encode() + b"\n",
    }
    bundle = rewritten(soak_bundle, tmp_path / "bundle.tar.gz", edits)
    run_cli_measured("audit", str(bundle)).assert_one_line(3, "imagelint/live/end.txt", value.split("=")[0])


@pytest.mark.parametrize("text", ["1", "0", "12.5", "1700000000.123456789"])
def test_plain_numbers_parse(text: str) -> None:
    assert seconds(text, "f", "x") == float(text)


@pytest.mark.parametrize("text", ["", " 1", "1\n", "+1", "1_0", "0x10", "²", "٣", "1e3", "-0", None])
def test_anything_else_is_not_a_count(text: str | None) -> None:
    with pytest.raises(ImageReadError, match="f: x"):
        count(text, "f", "x")


def test_the_memory_stat_walk_is_timed_at_both_ends_of_the_soak(soak_bundle: Path) -> None:
    """collect.sh's probe() reused $1 for its glob and wrote the timings to a path nobody reads."""
    from tests.support import need

    need(
        Path("/sys/fs/cgroup/memory").is_dir() or Path("/sys/fs/cgroup/cgroup.controllers").exists(),
        "no memory cgroups",
    )
    records = {m.name: data for m, data in members(soak_bundle) if data is not None}
    for end in ("start", "end"):
        record = records.get(f"imagelint/soak/probe.{end}")
        assert record is not None, sorted(records)
        fields = dict(line.split(" ", 1) for line in record.decode().splitlines())
        assert int(fields["cgroups"]) >= 1 and int(fields["ns"]) > 0
