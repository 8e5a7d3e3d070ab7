"""Bad input for `imagelint watch`: each is one line and exit 2 at start, or a source reported down
(``imagelint_source_up{source=...} 0`` and one stderr line) while the rest keeps working."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from imagelint.watch.loop import Watcher, WatchSettings
from tests.facts.journal.conftest import have_tools
from tests.facts.journal.exportgen import Host, write_journal
from tests.support import is_root, need, run_cli
from tests.watch.procs import IMAGELINT, free_port


def values(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def up(metrics: dict, source: str) -> float:
    return metrics[("imagelint_source_up", (("source", source),))]


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("imagelint: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.fixture
def ena_journal(tmp_path: Path) -> Path:
    """A real journal (systemd-journal-remote) holding 3 ENA resets and one soft lockup."""
    have_tools()
    host = Host(3)
    host.new_boot(1_700_000_000_000_000)
    export = b""
    for i in range(3):
        host.at(host.mono + 1_000_000)
        export += host.kernel(f"ena 0000:00:05.0 eth0: Trigger reset is on (reset {i})")
    host.at(host.mono + 1_000_000)
    export += host.kernel("watchdog: BUG: soft lockup - CPU#3 stuck for 22s! [kworker/3:1:123]")
    return write_journal(export, tmp_path / "journal")


def test_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        proc = run_cli("watch", f"--listen=127.0.0.1:{port}", "--duration=5s", timeout=60)
    assert proc.returncode == 2
    assert (
        one_error_line(proc)
        == f"imagelint: error: --listen 127.0.0.1:{port}: cannot listen: address already in use"
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--listen=127.0.0.1"], "--listen 127.0.0.1: expected ADDR:PORT"),
        (["--listen=::1:9000"], "write an IPv6 address in brackets"),
        ([], "give an output"),
        (["--textfile=/nonexistent/dir"], "--textfile /nonexistent/dir: not a directory"),
        (["--npd=bogus"], "--npd 'bogus': use one of dying-memcg-growth, unit-restart-loop, nic-resets"),
        (["--npd=nic-resets", "--listen=127.0.0.1:1"], "--npd runs one check and exits"),
        (["--listen=127.0.0.1:0", "--interval=ten"], "--interval"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(args: list[str], expected: str) -> None:
    proc = run_cli("watch", *args, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert expected in one_error_line(proc)


def test_missing_cgroups_and_no_systemd_leave_the_journal_counting(tmp_path: Path, ena_journal: Path) -> None:
    """No memory cgroup hierarchy under --cgroup-root; this host has no systemd as PID 1."""
    textdir = tmp_path / "out"
    textdir.mkdir()
    empty = tmp_path / "no-cgroups"
    empty.mkdir()
    proc = run_cli(
        "watch", f"--textfile={textdir}", f"--cgroup-root={empty}", f"--journal-dir={ena_journal}",
        "--journal-from-start", "--interval=1s", "--duration=3s", "--no-rules", timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    m = values((textdir / "imagelint.prom").read_text())
    assert up(m, "cgroups") == 0.0 and up(m, "memory_stat") == 0.0
    assert ("imagelint_memcg_dying", ()) not in m  # not measured: absent, never 0
    assert up(m, "journal") == 1.0
    assert m[("imagelint_journal_signals_total", (("signal", "ena-reset"),))] == 3.0
    assert m[("imagelint_journal_signals_total", (("signal", "soft-lockup"),))] == 1.0
    assert m[("imagelint_journal_entries_total", ())] == 4.0
    if not os.path.isdir("/run/systemd/system"):
        assert up(m, "systemd") == 0.0
        assert "watch: systemd: this host was not booted with systemd" in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if "watch: cgroups: " in ln]
    assert str(empty) in line and "not mounted" in line  # which hierarchy depends on this kernel
    assert all(line.startswith("imagelint: warning: watch: ") for line in proc.stderr.splitlines())


def test_an_unusable_systemctl_is_a_source_down(tmp_path: Path) -> None:
    said: list[str] = []
    settings = WatchSettings(
        systemctl="/nonexistent/systemctl", systemctl_prefix=("env",), journal_dir=str(tmp_path)
    )
    state = Watcher(settings, warn=said.append).step()
    assert state.sources["systemd"].up is False
    assert state.units == () and state.units_loaded == 0
    assert any(line.startswith("watch: systemd: systemctl show failed (exit 127)") for line in said), said
    assert state.sources["journal"].up is True  # an empty journal directory is readable


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory outside pytest's private tmp (0700), so an unprivileged user can reach it."""
    d = Path(tempfile.mkdtemp(prefix="imagelint-watch-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_an_unreadable_journal_is_a_source_down_and_the_rest_works(
    shared_dir: Path, ena_journal: Path
) -> None:
    need(is_root(), "dropping to an unprivileged user needs root")
    need(shutil.which("setpriv") is not None, "setpriv is not installed (util-linux)")
    journal = shared_dir / "journal"
    shutil.copytree(ena_journal, journal)
    journal.chmod(0o700)  # root's; the watch runs as nobody
    out = shared_dir / "out"
    out.mkdir()
    out.chmod(0o777)
    argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", IMAGELINT, "watch",
            f"--textfile={out}", f"--journal-dir={journal}", "--interval=1s", "--duration=3s",
            "--no-rules"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    m = values((out / "imagelint.prom").read_text())
    assert up(m, "journal") == 0.0
    assert f"imagelint: warning: watch: journal: {journal}: permission denied" in proc.stderr
    if os.path.exists("/sys/fs/cgroup/memory/memory.usage_in_bytes") or os.path.exists(
        "/sys/fs/cgroup/cgroup.stat"
    ):
        assert up(m, "cgroups") == 1.0 and m[("imagelint_memcg_live", ())] >= 1


def test_an_unreadable_journal_file_is_counted_and_said(tmp_path: Path, ena_journal: Path) -> None:
    (ena_journal / "junk.journal").write_bytes(b"not a journal at all" * 20)
    said: list[str] = []
    state = Watcher(
        WatchSettings(journal_dir=str(ena_journal), journal_from_start=True), warn=said.append
    ).step()
    assert state.sources["journal"].up is True
    assert state.signals["ena-reset"] == 3  # the good file is read
    assert state.journal_unreadable == 1
    assert any(line.startswith(f"watch: journal: {ena_journal / 'junk.journal'}: ") for line in said), said


def test_a_textfile_planted_as_a_link_is_refused_at_start(tmp_path: Path) -> None:
    """DIR/imagelint.prom is replaced, never written through: a link there (to a file of someone else's)
    is refused before the watch starts, and the file it names stays as it was."""
    textdir = tmp_path / "out"
    textdir.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("someone else's\n")
    victim.chmod(0o600)
    os.symlink(victim, textdir / "imagelint.prom")
    args = (f"--textfile={textdir}", "--interval=1s", "--duration=2s", "--no-rules")
    proc = run_cli("watch", *args, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "imagelint.prom: is a symbolic link" in one_error_line(proc)
    assert victim.read_text() == "someone else's\n" and victim.stat().st_mode & 0o777 == 0o600
    assert (textdir / "imagelint.prom").is_symlink()
