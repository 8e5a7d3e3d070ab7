"""The box: every command runs in a child under OS limits; whatever kills the child is one line, exit 3."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import os_root, run_cli


def _boxed(
    body: str, *, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``body`` (the command, returning an exit code) through ``run_boxed`` in a fresh interpreter."""
    code = (
        "import sys\n"
        "from imagelint import limits\n"
        "from imagelint.cli.box import run_boxed\n"
        "def command():\n    limits.now_reading('/images/hostile.img')\n"
        f"{body}\n"
        "sys.exit(run_boxed(command, limits.from_environment()))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def test_a_spinning_reader_meets_the_cpu_limit_and_is_inconclusive() -> None:
    # without the limit it spins until _boxed's timeout (TimeoutExpired fails the test)
    proc = _boxed("    while True:\n        pass", env={"IMAGELINT_CPU_LIMIT": "1"})
    assert proc.returncode == 3
    assert proc.stderr == (
        "imagelint: error: /images/hostile.img: the CPU-time limit (1 s, IMAGELINT_CPU_LIMIT) "
        "was reached while reading it; inconclusive\n"
    )


def test_a_reader_that_crashes_in_c_is_one_line_naming_the_signal() -> None:
    proc = _boxed("    import ctypes\n    ctypes.string_at(0)\n    return 0")
    assert proc.returncode == 3
    reason = "the reader died with SIGSEGV; inconclusive (please report this)"
    assert proc.stderr == f"imagelint: error: /images/hostile.img: {reason}\n"


def test_memory_past_the_limit_fails_in_the_child_not_in_the_caller() -> None:
    body = "    try:\n        bytearray(64 << 20)\n    except MemoryError:\n        return 42\n    return 0"
    assert _boxed(body, env={"IMAGELINT_MEMORY_LIMIT": "32"}).returncode == 42
    assert _boxed(body, env={"IMAGELINT_MEMORY_LIMIT": "0"}).returncode == 0


def test_the_childs_exit_code_and_output_pass_through() -> None:
    proc = _boxed("    print('from the child')\n    return 7")
    assert (proc.returncode, proc.stdout, proc.stderr) == (7, "from the child\n", "")


@pytest.mark.parametrize("blocked", [False, True], ids=["as-usual", "started-with-it-blocked"])
def test_sigterm_to_the_parent_reaches_the_child(blocked: bool) -> None:
    """Also when imagelint was started with the signal blocked (a caller's mask is inherited across
    exec): the child unblocks what the parent passes on, or a soak runs its course deaf to it."""
    body = (
        "    import signal, time\n"
        "    got = []\n"
        "    signal.signal(signal.SIGTERM, lambda *a: got.append(1))\n"
        "    print('ready', flush=True)\n"
        "    while not got:\n"
        "        time.sleep(0.05)\n"
        "    return 5"
    )
    code = (
        "import sys\nfrom imagelint import limits\nfrom imagelint.cli.box import run_boxed\n"
        f"def command():\n{body}\n"
        "sys.exit(run_boxed(command, limits.from_environment()))\n"
    )

    def block() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})

    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=block if blocked else None,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 5
    finally:
        with contextlib.suppress(ProcessLookupError):  # a child deaf to SIGTERM would loop on
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_the_real_cli_under_a_tight_memory_limit_is_inconclusive_with_the_image_named(tmp_path: Path) -> None:
    # a 15 MB sshd_config is under the 16 MiB read cap, and takes more than 40 MiB to read and match
    root = os_root(tmp_path / "image", {"/etc/ssh/sshd_config": ("#" * 100 + "\n") * 150_000})
    proc = run_cli("audit", str(root), "-f", "text", env={"IMAGELINT_MEMORY_LIMIT": "40"})
    assert proc.returncode == 3
    assert proc.stderr == (
        f"imagelint: error: {root}: the memory limit (40 MiB, IMAGELINT_MEMORY_LIMIT) "
        "was reached while reading it; inconclusive\n"
    )
    assert proc.stdout == ""
    proc = run_cli("audit", str(root), "-f", "text")  # the default limit is far above it
    assert (proc.returncode, proc.stderr) == (1, "")


def test_a_bad_limit_value_is_a_usage_error() -> None:
    proc = run_cli("rules", "list", env={"IMAGELINT_MEMORY_LIMIT": "²"})
    assert proc.returncode == 2
    assert proc.stderr.startswith("imagelint: error: IMAGELINT_MEMORY_LIMIT='²': expected a whole number")
    assert proc.stderr.count("\n") == 1


def test_watch_runs_without_a_cpu_limit_and_other_commands_with_one(monkeypatch) -> None:
    import imagelint.cli
    import imagelint.cli.box

    seen = []

    def record(command, run_limits) -> int:
        seen.append(run_limits)
        return 0

    monkeypatch.setattr(imagelint.cli.box, "run_boxed", record)
    monkeypatch.setenv("IMAGELINT_CPU_LIMIT", "30")
    for argv in (["imagelint", "watch", "--listen", ":0"], ["imagelint", "--debug", "audit", "/"]):
        monkeypatch.setattr(sys, "argv", argv)
        with pytest.raises(SystemExit):
            imagelint.cli.main()
    assert [(lim.cpu_seconds, lim.memory_mib) for lim in seen] == [(0, 2048), (30, 2048)]


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGHUP])
def test_a_run_stopped_from_outside_says_terminated_and_is_inconclusive(sent: signal.Signals) -> None:
    """CI cancelling a job, `timeout`: the signal passed on to a reader that does not handle it."""
    code = (
        # SIGHUP's default action, as a shell not under nohup starts it (an ignored one stays ignored)
        "import signal, sys, time\nsignal.signal(signal.SIGHUP, signal.SIG_DFL)\n"
        "from imagelint import limits\nfrom imagelint.cli.box import run_boxed\n"
        "def command():\n    limits.now_reading('/images/big.qcow2')\n"
        "    print('ready', flush=True)\n    time.sleep(60)\n    return 0\n"
        "sys.exit(run_boxed(command, limits.from_environment()))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    proc.send_signal(sent)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 3
    assert (
        err == f"imagelint: error: /images/big.qcow2: terminated ({sent.name}, from outside); inconclusive\n"
    )


def test_vm_limits_bind_imagelint_and_give_qemu_its_memory_back() -> None:
    """``vm check`` runs under soft limits only: its own allocations still fail, while a trusted child
    started with ``limits.lifted`` (QEMU, whose guest memory alone is over the limit) gets the hard ones."""
    allocate = "bytearray(96 << 20)"
    code = (
        "import subprocess, sys\n"
        "from imagelint import limits\n"
        "from imagelint.cli.box import run_boxed\n"
        "def command():\n"
        f"    try:\n        {allocate}\n        return 1\n    except MemoryError:\n        pass\n"
        f"    child = [sys.executable, '-c', '{allocate}']\n"
        "    held = subprocess.run(child, capture_output=True).returncode\n"
        "    lifted = subprocess.run(child, preexec_fn=limits.lifted).returncode\n"
        "    return 10 * (held != 0) + (lifted == 0)\n"
        "sys.exit(run_boxed(command, limits.from_environment(machine=True)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"IMAGELINT_MEMORY_LIMIT": "64", "PATH": "/usr/bin:/bin", **_pythonpath()},
        check=False,
    )
    assert proc.returncode == 11, proc.stderr


def _pythonpath() -> dict[str, str]:
    import os

    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
