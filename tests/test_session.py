"""One run, every door: the session is the one caller of the engine, so the config means the same
whichever way an image comes in (a directory, a disk image file, a collector bundle, a side of diff).
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from tests.collector.support import collect
from tests.support import REPO, os_root, run_cli


def _drivers() -> set[str]:
    """Modules of imagelint that import the engine's ``audit`` or call ``engine.audit``."""
    found = set()
    for path in (REPO / "imagelint").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            imported = (
                isinstance(node, ast.ImportFrom)
                and node.module == "imagelint.engine"
                and any(a.name == "audit" for a in node.names)
            )
            called = (
                isinstance(node, ast.Attribute)
                and node.attr == "audit"
                and ast.unparse(node.value) == "engine"
            )
            if imported or called:
                found.add(str(path.relative_to(REPO)))
    return found


def test_the_engine_has_one_driver() -> None:
    assert _drivers() == {"imagelint/session.py"}


@pytest.fixture(scope="module")
def no_journal(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small image that keeps no journal, and a config that requires one."""
    base = tmp_path_factory.mktemp("doors")
    root = os_root(
        base / "image",
        {
            "/etc/os-release": "ID=debian\nVERSION_ID=12\n",
            "/usr/lib/os-release": "ID=debian\n",
            "/etc/hostname": "",
            "/var/log/README": "no journal here\n",
        },
    )
    config = base / "require.imagelint.yaml"
    config.write_text("require-journal: true\n")
    return root, config


def _disk_image(root: Path, out: Path) -> Path:
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-d", str(root), str(out), "16M"], check=True)
    return out


def test_require_journal_is_inconclusive_through_every_door(
    no_journal: tuple[Path, Path], tmp_path: Path
) -> None:
    root, config = no_journal
    doors = {
        "directory": ["audit", str(root)],
        "disk image": ["audit", str(_disk_image(root, tmp_path / "disk.img"))],
        "bundle": ["audit", str(collect(root, tmp_path / "collect"))],
        "diff": ["diff", str(root), str(root)],
    }
    for door, args in doors.items():
        relaxed = run_cli(*args, "-f", "json:/dev/null" if args[0] == "audit" else "text")
        assert relaxed.returncode == 0, (door, relaxed.stdout, relaxed.stderr)  # no journal: not applicable
        strict = run_cli(*args, "-c", str(config), "-f", "text")
        assert strict.returncode == 3, (door, strict.stdout, strict.stderr)


def test_a_console_is_judged_by_the_kernel_line_rules_alone_through_the_journals_checks(
    tmp_path: Path,
) -> None:
    from imagelint.facts.journal.console import ConsoleLog
    from imagelint.report import Verdict
    from imagelint.session import RunOptions, judge_console, prepare
    from imagelint.targets.rootfs import RootfsTarget

    run = prepare(RunOptions(outputs=[]))
    lines = (
        b"[    0.000000] Linux version 6.1.0-28-cloud-amd64",
        b"[\x1b[0;32m  OK  \x1b[0m] Started leaky.service.",
        b"[  301.000000] watchdog: BUG: soft lockup - CPU#1 stuck for 23s! [::error::x:77]",
        b"[  302.000000] rcu: INFO: rcu_sched self-detected stall on CPU",
        b"[  400.000000] ena 0000:00:05.0 eth0: Trigger reset is on",
        b"[  500.000000] Memory cgroup out of memory: Killed process 4242 (python3) total-vm:8kB",
    )
    report = judge_console(
        run, RootfsTarget(tmp_path), ConsoleLog(lines, powered_on_usec=1_765_000_000_000_000)
    )
    ran = {r.rule_id for r in report.rules}
    assert ran == {"IL310", "IL311", "IL312", "IL313", "IL314", "IL315", "IL316", "IL317"}  # no other rule
    assert sorted(f.rule_id for f in report.findings) == ["IL311", "IL314", "IL315", "IL317"]
    lockup = next(f for f in report.findings if f.rule_id == "IL314")
    assert lockup.evidence["boot"] == "console" and "[::error::x:77]" in lockup.evidence["sample"]
    assert report.verdict is Verdict.FAIL and report.facts["console"]["source"] == "console"
    assert any("console: 5 kernel lines on the console" in n for n in report.notes)

    dropped = judge_console(run, RootfsTarget(tmp_path), ConsoleLog(lines[:1], dropped=3))
    assert not dropped.findings and dropped.verdict is Verdict.INCONCLUSIVE  # never a pass on a part
