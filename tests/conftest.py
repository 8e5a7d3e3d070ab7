"""Shared fixtures: the real Debian image, and the rule that CI never skips a real test.

Every run ends with one line that names and counts what did not run as written: skipped tests
(by reason), expected failures (xfail) and unexpected passes (xpass). With ``IMAGELINT_NO_SKIP=1``
(set by ``.ci/run`` and the CI workflow) any of them fails the session: on CI the facilities (root,
debootstrap, systemd-nspawn, packer, memory cgroups) exist, so a skip there would hide a test that
did not run, and an xfail would pass unseen. A test that needs the cgroup v1 memory hierarchy is
marked ``cgroup_v1``; a machine with only cgroup v2 (GitHub's runners) deselects it with
``-m "not cgroup_v1"`` (``tests.soak.memcg.need_v1_memory`` fails a test that needs it unmarked).

``make test`` runs the suite in two phases: every test not marked ``serial`` in parallel
(pytest-xdist, ``--dist loadfile``: a file's tests on one worker, so its module fixtures are built
once), then the ``serial`` ones alone, one at a time. ``serial`` marks a test that loads the machine
on purpose or measures machine-wide state (a pinned SCHED_FIFO load, the host's dying memory
cgroups): beside other tests it would disturb them or be disturbed. ``tests.support.must_run_alone``
fails a test that does such a thing without the mark.

A test marked ``lane`` leaves the parallel phase for a pytest process of its own that runs beside
it, one test at a time: a test that would hold a worker for minutes while something else does the
work (a VM, a one-minute power-off timer, the SDK's back-offs) takes, in the lane, only the CPU the
workers leave idle, and no other test waits for it. It must bear other tests' load, as every parallel
test must; a test that must run alone cannot be in the lane (``serial`` with ``lane`` is an error).

Run by hand with ``-n ... --dist loadgroup``, the ``serial`` tests share one xdist group (one
worker, one after another). Session fixtures run once per worker: the machine-wide caches they fill
(``~/.cache/imagelint-tests``) are built under a lock into a temporary name and renamed into place.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import MARKS_ENV, REPO, is_root, need


def _test_image(flavour: str, name: str) -> Path:
    """A tree built by scripts/build-test-rootfs.sh once per machine (under its lock) and cached."""
    script = REPO / "scripts" / "build-test-rootfs.sh"
    xdg_cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    cache = Path(os.environ.get("IMAGELINT_TEST_CACHE", xdg_cache / "imagelint-tests"))
    ready = (cache / name / ".imagelint-rootfs-complete").exists()
    if not ready:
        need(is_root(), "building the Debian test image with debootstrap needs root")
        need(shutil.which("debootstrap") is not None, "debootstrap is not installed")
    proc = subprocess.run(
        ["bash", str(script), "--flavour", flavour], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        pytest.fail(f"building the Debian test image ({flavour}) failed:\n{proc.stderr[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def debian_rootfs() -> Path:
    """A real debootstrapped Debian bookworm tree, built once per machine and cached outside the repo.

    Shared by many tests: treat it as read-only (copy it with ``copy_rootfs`` to change anything).
    """
    return _test_image("minimal", "bookworm")


@pytest.fixture(scope="session")
def cloud_rootfs() -> Path:
    """The minimal tree plus a cloud/Kubernetes-node package set installed with apt (cloud-init,
    docker.io, containerd, collectd, nfs-common, chrony, rsyslog, lvm2, ...), as an image build
    leaves it before its clean-up step. Read-only, like ``debian_rootfs``."""
    return _test_image("cloud", "bookworm-cloud")


@pytest.fixture(scope="session")
def twin_rootfs() -> Path:
    """A second, independent debootstrap of the same suite and package list as ``debian_rootfs``."""
    return _test_image("twin", "bookworm-twin")


@pytest.fixture(scope="session")
def vendor_rootfs() -> Path:
    """``debian_rootfs`` after a vendor update: prometheus-node-exporter installed with apt inside the
    tree (its postinst enables its service). Read-only, like ``debian_rootfs``."""
    return _test_image("vendor", "bookworm-vendor")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("serial"):
            if item.get_closest_marker("lane"):
                raise pytest.UsageError(
                    f"{item.nodeid}: a serial test runs alone, not in the lane beside others"
                )
            item.add_marker(pytest.mark.xdist_group("serial"))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # the files with a test marked slow are handed out first, so that the run does not end
        # waiting for one that started last (every worker collects the same order)
        slow = {item.path for item in items if item.get_closest_marker("slow")}
        items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(autouse=True)
def _marks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's marks, for the helpers that check a test says what it does (support.must_be_marked)."""
    monkeypatch.setenv(MARKS_ENV, ",".join(sorted({mark.name for mark in request.node.iter_markers()})))


def _not_run_as_written(stats: dict[str, list[pytest.TestReport]]) -> tuple[int, str]:
    """(how many, the line naming them): skips by reason, xfails and xpasses by test."""
    skips: dict[str, int] = {}
    for report in stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        skips[reason] = skips.get(reason, 0) + 1
    xfail = [r.nodeid for r in stats.get("xfailed", [])]
    xpass = [r.nodeid for r in stats.get("xpassed", [])]
    named = "; ".join(f"{n} × {reason}" for reason, n in sorted(skips.items(), key=lambda kv: -kv[1]))
    parts = [
        f"skips: {sum(skips.values())}" + (f" ({named})" if named else ""),
        f"xfail: {len(xfail)}" + (f" ({', '.join(xfail)})" if xfail else ""),
        f"xpass: {len(xpass)}" + (f" ({', '.join(xpass)})" if xpass else ""),
    ]
    return sum(skips.values()) + len(xfail) + len(xpass), " · ".join(parts)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller counts the workers' reports
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        # never pytest's exit 5: a selection (-m, -k) that holds no test here (a phase of `make test`
        # on a part of the suite) is not a failure; a run that found no test at all is one
        selected = bool(session.config.option.markexpr or session.config.option.keyword)
        reporter.write_line("no test selected" if selected else "no test found", yellow=True)
        session.exitstatus = pytest.ExitCode.OK if selected else pytest.ExitCode.TESTS_FAILED
    count, _ = _not_run_as_written(reporter.stats)
    if count and os.environ.get("IMAGELINT_NO_SKIP") == "1":
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    count, line = _not_run_as_written(terminalreporter.stats)
    terminalreporter.write_sep("-", line, yellow=bool(count), bold=True)
    if count and os.environ.get("IMAGELINT_NO_SKIP") == "1":
        terminalreporter.write_line(
            f"IMAGELINT_NO_SKIP=1: {count} test(s) not run as written (skips, xfail, xpass): CI must run all",
            red=True,
        )


@pytest.fixture(scope="session")
def clean_rootfs(debian_rootfs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the real image with the hygiene remediations applied (a properly cleaned image)."""
    from tests.support import clean_image, copy_rootfs

    return clean_image(copy_rootfs(debian_rootfs, tmp_path_factory.mktemp("clean") / "rootfs"))


@pytest.fixture(scope="session")
def clean_cloud_rootfs(cloud_rootfs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the cloud image cleaned as image builders clean before capture (the hygiene
    remediations, and ``cloud-init clean``). Read-only: copy it with ``copy_rootfs`` to change it."""
    from tests.support import clean_image, copy_rootfs

    image = clean_image(copy_rootfs(cloud_rootfs, tmp_path_factory.mktemp("cloud") / "img"))
    state = image / "var/lib/cloud"
    for entry in state.iterdir() if state.is_dir() else []:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return image


@pytest.fixture(scope="session")
def faulty_tree(debian_rootfs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the real Debian image with the sample image's faults planted (the ECS agent
    enabled without a cluster, baked machine-id and host keys, credentials, ...)."""
    from tests.aws.disk_image import plant_sample_faults
    from tests.support import copy_rootfs

    return plant_sample_faults(copy_rootfs(debian_rootfs, tmp_path_factory.mktemp("faulty") / "rootfs"))


@pytest.fixture(scope="session")
def faulty_disk(faulty_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """That tree as a GPT disk (EFI partition + ext4 root), built with sfdisk, mkfs.vfat, mke2fs -d."""
    from tests.aws.disk_image import gpt_ext4_image

    return gpt_ext4_image(faulty_tree, tmp_path_factory.mktemp("disk") / "disk.img")


_STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


@pytest.fixture(autouse=True)
def _signals_left_as_found() -> Iterator[None]:
    """A test that leaves a signal blocked, or the handling of SIGINT, SIGTERM, SIGHUP or SIGQUIT
    changed, in its worker fails, named: every imagelint the worker starts afterwards inherits a
    blocked or ignored signal (as it would a caller's), and a run waiting for SIGINT would hang."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, ())
    handlers = {number: signal.getsignal(number) for number in _STOPPING}
    yield
    left = signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    changed = [number for number in _STOPPING if signal.getsignal(number) is not handlers[number]]
    for number in changed:
        signal.signal(number, handlers[number])
    names = sorted(signal.Signals(number).name for number in (left - mask) | set(changed))
    if names:
        pytest.fail(f"the test left signals blocked or handled otherwise: {', '.join(names)}", pytrace=False)


@pytest.fixture(autouse=True)
def _no_audit_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test keeps audits or EBS blocks in the user's cache (imagelint.diff.cache,
    imagelint.aws.block_store): a test of them names its own. Loaded rule packs are kept
    (imagelint.rulepacks.cache): keyed by their bytes and imagelint's code, they are the same for all."""
    monkeypatch.setenv("IMAGELINT_NO_CACHE", "audits,blocks")
