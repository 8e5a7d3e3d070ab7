"""`imagelint watch --npd CHECK`: node-problem-detector's plugin contract (exit 0 OK, 1 problem, 2 unknown;
one line on stdout, at most 80 characters), against a real leak, real journals and this host's systemd
(or its absence)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagelint.watch.npd import MAX_MESSAGE, one_line
from tests.facts.journal.conftest import have_tools
from tests.facts.journal.exportgen import Host, write_journal
from tests.soak.memcg import MemcgLab, need_v1_memory
from tests.support import need, run_cli

REPO = Path(__file__).resolve().parents[2]
NPD_CONFIG = REPO / "deploy/node-problem-detector/imagelint-monitor.json"


def npd(*args: str) -> tuple[int, str]:
    proc = run_cli("watch", *args, timeout=60)
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 and len(lines[0]) <= MAX_MESSAGE, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, lines[0]


def journal_with(tmp: Path, messages: list[str], *, minutes_ago: float = 1.0) -> Path:
    have_tools()
    import time

    host = Host(5)
    host.new_boot(int((time.time() - minutes_ago * 60) * 1e6))
    export = b""
    for text in messages:
        host.at(host.mono + 1_000_000)
        export += host.kernel(text)
    return write_journal(export, tmp)


@pytest.fixture
def leak() -> Iterator[MemcgLab]:
    need_v1_memory()
    lab = MemcgLab("npd")
    try:
        yield lab
    finally:
        lab.cleanup()


@pytest.mark.root
@pytest.mark.serial
@pytest.mark.cgroup_v1
def test_dying_growth_is_unknown_then_a_problem_across_invocations(tmp_path: Path, leak: MemcgLab) -> None:
    state = tmp_path / "npd.json"
    args = ("--npd=dying-memcg-growth", f"--npd-state={state}", "--window=10m")
    code, line = npd(*args)
    assert code == 2 and "collecting samples (1 of 3)" in line  # no trend from one sample: Unknown
    codes = []
    for _ in range(7):
        for _ in range(5):
            leak.restart_once(leak=True)
        code, line = npd(*args)
        codes.append(code)
    assert codes[-1] == 1, (codes, line)  # significant growth, thousands per hour
    assert line.startswith("dying memcgs ") and "/h (p=" in line
    assert len(json.loads(state.read_text())["dying"]) == 8


def test_dying_growth_without_cgroups_is_unknown(tmp_path: Path) -> None:
    code, line = npd("--npd=dying-memcg-growth", f"--cgroup-root={tmp_path}")
    assert code == 2 and line.startswith("no memory cgroup counts")


def test_nic_resets_problem_ok_and_unknown(tmp_path: Path) -> None:
    bad = journal_with(tmp_path / "bad", ["ena 0000:00:05.0 eth0: Trigger reset is on", "kernel: hello"])
    code, line = npd("--npd=nic-resets", f"--journal-dir={bad}")
    assert (code, line) == (1, "NIC trouble in the window: 1 ena-reset")
    old = journal_with(tmp_path / "old", ["ena 0000:00:05.0 eth0: Trigger reset is on"], minutes_ago=120)
    code, line = npd("--npd=nic-resets", f"--journal-dir={old}", "--window=1h")
    assert code == 0, line  # outside the window
    code, line = npd("--npd=nic-resets", f"--journal-dir={tmp_path / 'absent'}")
    assert code == 2 and line.startswith("cannot read the journal")


def test_restart_loop_without_systemd_is_unknown() -> None:
    need(
        not os.path.isdir("/run/systemd/system"),
        "this host runs systemd; the no-systemd case needs one without",
    )
    code, line = npd("--npd=unit-restart-loop")
    assert code == 2 and line.startswith("cannot read unit state: this host was not booted with systemd")


def test_messages_are_one_bounded_visible_line() -> None:
    line = one_line("ecs\x1b[31m.service\nrestarted " + "x" * 200)
    assert "\n" not in line and "\x1b" not in line and len(line) == MAX_MESSAGE


def test_the_example_npd_config_runs_each_rule(tmp_path: Path) -> None:
    """Each rule of the shipped custom-plugin-monitor config, run as NPD would (host paths mapped here)."""
    config = json.loads(NPD_CONFIG.read_text())
    assert config["plugin"] == "custom"
    assert config["pluginConfig"]["max_output_length"] == MAX_MESSAGE
    conditions = {c["type"] for c in config["conditions"]}
    assert conditions == {"DyingMemcgGrowth", "UnitRestartLoop", "NICResets"}
    journal = journal_with(tmp_path / "j", ["kernel: nothing to see"])
    mapping = {
        "/host/proc": "/proc",
        "/host/sys/fs/cgroup": "/sys/fs/cgroup",
        "/host/var/log/journal": str(journal),
        "/var/lib/imagelint": str(tmp_path),
    }
    for rule in config["rules"]:
        assert rule["type"] == "permanent" and rule["condition"] in conditions
        assert rule["path"].endswith("/imagelint") and rule["args"][0] == "watch"
        args = []
        for arg in rule["args"][1:]:
            for host, here in mapping.items():
                arg = arg.replace(host, here)
            args.append(arg)
        code, _line = npd(*args)
        assert code in (0, 1, 2)
