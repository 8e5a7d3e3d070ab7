"""`make test` as make would run it (``make -n``: nothing runs): every test runs in exactly one of its
three runs whatever marks it carries (the VM boots marked vm_boots in none: `make test-vm` runs
them, and only them), the lane beside the parallel phase, the marks a machine leaves out are left out
of all, the workers follow the CPUs, and CI runs this very command; `make test-quick` names paths that
exist."""

from __future__ import annotations

import itertools
import os
import shlex
import shutil
import subprocess

import yaml
from _pytest.mark.expression import Expression

from tests.support import REPO, need

MARKS = ("serial", "lane", "slow", "root", "cgroup_v1", "vm_boots")


def _recipe(target: str = "test", **variables: str) -> str:
    """The shell ``make TARGET`` would run (``make -n``), continuation lines joined, with make
    variables given in the environment."""
    need(shutil.which("make") is not None, "make is not installed")
    out = subprocess.run(
        ["make", "-n", "--no-print-directory", target],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", **variables},
    ).stdout
    return out.replace("\\\n", " ")


def _pytest_runs(target: str = "test", **variables: str) -> list[list[str]]:
    """The pytest command lines of ``make TARGET``, in order."""
    runs = []
    for command in _recipe(target, **variables).split(";"):
        words = shlex.split(command)
        if "pytest" in words:
            runs.append(words[words.index("pytest") + 1 :])
    return runs


def _selects(run: list[str], marks: set[str]) -> bool:
    expression = run[run.index("-m") + 1]
    return Expression.compile(expression).evaluate(lambda name: name in marks)


def _every_mark_set() -> list[set[str]]:
    return [set(c) for n in range(len(MARKS) + 1) for c in itertools.combinations(MARKS, n)]


def _phase(marks: set[str]) -> list[str]:
    if "vm_boots" in marks:
        return []
    return ["lane"] if "lane" in marks else ["serial"] if "serial" in marks else ["parallel"]


def test_every_test_runs_in_exactly_one_run_the_lane_beside_the_parallel_phase_then_the_serial() -> None:
    lane, parallel, serial = _pytest_runs()
    for marks in _every_mark_set():
        runs = [
            name
            for name, run in (("lane", lane), ("parallel", parallel), ("serial", serial))
            if _selects(run, marks)
        ]
        assert runs == _phase(marks), marks
    assert "-n" in parallel and parallel[parallel.index("--dist") + 1] == "loadfile"
    assert "-n" not in serial and "-n" not in lane  # one test at a time
    assert all("--durations=10" in run for run in (lane, parallel, serial))
    # the lane starts in the background (its output to a file), the parallel phase in the foreground;
    # the lane is waited for, its log printed, before the serial phase starts
    recipe = _recipe()
    lane_start = recipe.index('-m "lane')
    assert recipe.index("& lane_pid=$!", lane_start) < recipe.index("--dist loadfile")
    assert recipe.index("--dist loadfile") < recipe.index("wait $lane_pid") < recipe.index('-m "serial')
    assert "cat build/test-lane.log" in recipe and "$lane -eq 0" in recipe


def test_a_mark_this_machine_cannot_run_is_left_out_of_every_run_and_nothing_else_is() -> None:
    runs = _pytest_runs(TEST_EXCLUDE="cgroup_v1")
    for marks in _every_mark_set():
        selected = sum(_selects(run, marks) for run in runs)
        assert selected == (0 if marks & {"cgroup_v1", "vm_boots"} else 1), marks


def test_make_test_vm_runs_the_vm_boots_alone_and_nothing_else() -> None:
    (run,) = _pytest_runs("test-vm")
    assert "-n" not in run  # one VM at a time
    for marks in _every_mark_set():
        assert _selects(run, marks) == ("vm_boots" in marks), marks


def test_the_workers_follow_the_cpus_this_process_may_use() -> None:
    _, parallel, _ = _pytest_runs()
    assert parallel[parallel.index("-n") + 1] == str(len(os.sched_getaffinity(0)))
    _, parallel, _ = _pytest_runs(TEST_WORKERS="3")
    assert parallel[parallel.index("-n") + 1] == "3"


def test_ci_runs_the_readmes_test_command_and_leaves_out_what_githubs_runners_lack() -> None:
    readme = (REPO / "README.md").read_text()
    assert "\nmake test " in readme.split("[start:setup]")[1].split("[end:setup]")[0]
    script = (REPO / ".ci/run").read_text().strip().splitlines()
    assert script[-1] == "make test" and "export IMAGELINT_NO_SKIP=1" in script
    workflow = yaml.safe_load((REPO / ".github/workflows/ci.yml").read_text())
    commands = {}
    for name, job in workflow["jobs"].items():
        assert job["runs-on"] == "ubuntu-latest", name
        (commands[name],) = [shlex.split(step["run"]) for step in job["steps"] if "run" in step]
    assert commands["test"][-1] == ".ci/run" and "TEST_EXCLUDE=cgroup_v1" in commands["test"]  # v2 only
    # the VM boots make test leaves out run there with KVM, where a skip fails the job as in .ci/run
    assert commands["vm"][-2:] == ["make", "test-vm"] and "IMAGELINT_NO_SKIP=1" in commands["vm"]


def test_the_quick_subset_names_paths_that_exist_and_leaves_out_the_slow_the_root_and_the_serial() -> None:
    (run,) = _pytest_runs("test-quick")
    paths = [word for word in run if word.startswith("tests/")]
    assert paths and all((REPO / path).exists() for path in paths), paths
    for marks in _every_mark_set():
        assert _selects(run, marks) == (not marks & {"serial", "lane", "slow", "root"}), marks
