"""One fact, one outcome in every command (issue 49): a host whose PID 1 is not systemd has no service
manager, so every rule about the manager's services is *not applicable* (IL211/IL212 in ``audit``,
IL405 in ``soak`` and in ``watch``'s judge); a manager that runs and does not answer ``systemctl
show`` is data not read, *inconclusive* in all of them; a booted systemd is judged (pass or fail).

Such a host three ways: a bundle the real collector recorded on this machine (its ``live/*.status``
set to what a host without systemd records, or to a booted host whose bus timed out, as
tests/soak/test_missing_sources.py does), this process tree in a PID namespace of its own with
``/run/systemd`` hidden (PID 1 is the test's shell, and ``sd_booted()`` says no, as on a host never
booted with systemd), and a manager that cannot be reached. The booted one: the nspawn-booted test
image (tests/nspawn.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from imagelint.config import Config
from imagelint.engine import RunSettings, audit
from imagelint.probes.systemd import collect_live_state
from imagelint.rulepacks import Scope, builtin_pack_paths, load_packs
from imagelint.session import RunOptions, prepare
from imagelint.targets import RootfsTarget
from imagelint.watch.loop import Watcher, WatchSettings
from tests.bundle.support import collect_soak_bundle, rewritten
from tests.nspawn import booted_live
from tests.support import build_tree, is_root, need, run_cli

NOT_BOOTED = "System has not been booted with systemd as init system (PID 1). Can't operate."
TIMED_OUT = "Failed to connect to bus: Connection timed out"
LIVE_RULES = ("IL211", "IL212")


def _status(booted: bool | None) -> Callable[[bytes], bytes]:
    """A recorded ``systemctl show`` status as a host without systemd, or a booted one whose bus timed
    out, leaves it (whatever this machine is); ``None``: a record that does not say whether systemd ran."""

    def edit(data: bytes) -> bytes:
        values = {
            b"booted": b"1" if booted else b"0",
            b"rc": b"1",
            b"stderr": (TIMED_OUT if booted else NOT_BOOTED).encode(),
        }
        if booted is None:
            del values[b"booted"]
        lines = [ln for ln in data.splitlines() if ln.split(b" ", 1)[0] not in {*values, b"booted"}]
        return b"\n".join([*lines, *(k + b" " + v for k, v in values.items())]) + b"\n"

    return edit


def _outcomes(report: dict, rules: tuple[str, ...]) -> dict[str, str]:
    return {r["rule_id"]: r["outcome"] for r in report["rules"] if r["rule_id"] in rules}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return collect_soak_bundle(tmp_path_factory.mktemp("collect"), seconds=0.6, interval=0.2)


@pytest.mark.parametrize(
    ("booted", "outcome", "code"),
    [(False, "not-applicable", 0), (True, "error", 3), (None, "error", 3)],
    ids=["no-systemd", "no-answer", "not-said"],
)
def test_audit_and_soak_of_one_bundle_agree(
    bundle: Path, tmp_path: Path, booted: bool | None, outcome: str, code: int
) -> None:
    edits = {f"imagelint/live/{name}.status": _status(booted) for name in ("start", "end")}
    edited = rewritten(bundle, tmp_path / "host.tar.gz", edits)
    audited = run_cli("audit", str(edited), *(f"--select={r}" for r in LIVE_RULES), "-f", "json")
    soaked = run_cli("soak", "--from-bundle", str(edited), "--select=IL405", "-f", "json")
    for proc in (audited, soaked):
        assert "Traceback" not in proc.stderr, proc.stderr
    a, s = json.loads(audited.stdout), json.loads(soaked.stdout)
    assert _outcomes(a, LIVE_RULES) == dict.fromkeys(LIVE_RULES, outcome), a["rules"]
    assert _outcomes(s, ("IL405",)) == {"IL405": outcome}, s["rules"]
    assert (audited.returncode, soaked.returncode) == (code, code)
    if booted is False:
        reasons = [r["reason"] for r in a["rules"] if r["rule_id"] in LIVE_RULES]
        reasons += [r["reason"] for r in s["rules"] if r["rule_id"] == "IL405"]
        assert all("no systemd manager runs on this host" in r for r in reasons), reasons


def _watch_il405(settings: WatchSettings) -> str:
    """IL405's outcome once the watch judged its window (three samples a second apart)."""
    watcher = Watcher(settings, rules=prepare(RunOptions(outputs=[], select=["IL405"])))
    deadline = time.monotonic() + 30
    while True:
        state = watcher.step()
        judged = {v.rule_id: v.outcome for v in state.verdicts}
        if "IL405" in judged:
            return judged["IL405"]
        assert time.monotonic() < deadline, state.sources
        time.sleep(0.5)


FAST = {
    "interval": 0.5,
    "units_every": 0.5,
    "judge_every": 0.5,
    "walk_every": 3600.0,
    "journal_every": 3600.0,
}


def test_watch_judges_a_manager_that_does_not_answer_inconclusive(tmp_path: Path) -> None:
    """Through a prefix a manager is taken to run (as soak takes it): its silence is missing data."""
    need(os.path.isdir("/sys/fs/cgroup"), "the watch's judge needs cgroup samples")
    settings = WatchSettings(
        systemctl="/nonexistent/systemctl", systemctl_prefix=("env",), journal_dir=str(tmp_path), **FAST
    )
    assert _watch_il405(settings) == "error"


@pytest.mark.root
def test_a_process_tree_whose_pid_1_is_not_systemd_is_not_applicable_everywhere(tmp_path: Path) -> None:
    """``audit --live``, ``soak`` and ``watch`` run in a PID namespace whose PID 1 is a shell, with
    ``/run/systemd`` hidden under a tmpfs where the machine has one (so ``sd_booted()`` says no)."""
    need(is_root(), "a PID namespace of its own (unshare --pid) needs root")
    need(shutil.which("unshare") is not None, "unshare (util-linux) is not installed")
    exe = Path(sys.executable).with_name("imagelint")  # the venv running these tests
    need(exe.exists(), "the imagelint command is not installed")
    script = f"""
set -u
[ -d /run/systemd ] && mount -t tmpfs none /run/systemd
echo "pid1 $(cat /proc/1/comm)" > {tmp_path}/pid1
cd {tmp_path}
{exe} audit --live / --select=IL211 --select=IL212 -f json:audit.json; echo $? > audit.rc
{exe} soak --duration 2s --interval 1s --select=IL405 -f json:soak.json; echo $? > soak.rc
{exe} watch --textfile=. --interval=1s --units-every=1s --judge-every=1s --duration=5s \\
    --journal-dir=no-journal 2> watch.err; echo $? > watch.rc
"""
    proc = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "--mount", "sh", "-c", script],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "pid1").read_text().strip() == "pid1 sh"
    a = json.loads((tmp_path / "audit.json").read_text())
    s = json.loads((tmp_path / "soak.json").read_text())
    assert _outcomes(a, LIVE_RULES) == dict.fromkeys(LIVE_RULES, "not-applicable"), a["rules"]
    assert _outcomes(s, ("IL405",)) == {"IL405": "not-applicable"}, s["rules"]
    assert (tmp_path / "audit.rc").read_text().strip() == (tmp_path / "soak.rc").read_text().strip() == "0"
    prom = (tmp_path / "imagelint.prom").read_text()
    assert (
        'imagelint_verdict{name="unit-restarting-during-soak",outcome="not-applicable",rule="IL405"} 1.0'
        in prom
    )


@pytest.fixture
def container(debian_rootfs: Path) -> Iterator[list[str]]:
    need(is_root(), "booting a container needs root")
    with booted_live(debian_rootfs) as prefix:
        yield prefix


@pytest.mark.root
@pytest.mark.slow
def test_a_booted_systemd_is_judged_in_audit_and_watch(container: list[str], tmp_path: Path) -> None:
    live = collect_live_state(prefix=container)
    assert live.available and live.booted, live.reason
    root = build_tree(tmp_path / "r", {"/etc/hostname": "x\n"})
    packs = load_packs([], builtin=builtin_pack_paths())
    settings = RunSettings(scopes=(Scope.IMAGE, Scope.HOST), sources=(live,))
    report = audit(RootfsTarget(root), packs, Config(select=list(LIVE_RULES)), settings)
    # judged: pass, or fail where the image's own units fail here (its sshd beside another's)
    outcomes = {r.rule_id: r.outcome.value for r in report.rules if r.rule_id in LIVE_RULES}
    assert set(outcomes) == set(LIVE_RULES) and set(outcomes.values()) <= {"pass", "fail"}, outcomes
    watched = WatchSettings(systemctl_prefix=tuple(container), journal_dir=str(tmp_path), **FAST)
    assert _watch_il405(watched) in ("pass", "fail")
