"""Shell completion: ``imagelint completion SHELL`` prints the script ``--install-completion``
installs (for any shell, wherever it runs), and the program answers it with commands, subcommands
and options."""

from __future__ import annotations

import pytest

from tests.support import run_cli


def _complete(words: str) -> list[str]:
    cword = str(len(words.split()) - 1)
    proc = run_cli(env={"_IMAGELINT_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": cword})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("imagelint au", ["audit"]),
        ("imagelint ami po", ["policies"]),
        ("imagelint audit --fail-on-n", ["--fail-on-new"]),
        ("imagelint audit --fail-on h", ["high"]),  # a severity, never a file name
        ("imagelint soak --fail-on c", ["critical"]),
    ],
)
def test_the_program_answers_completion(words: str, expected: list[str]) -> None:
    assert _complete(words) == expected


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish", "powershell"])
def test_completion_prints_a_script_that_calls_back(shell: str) -> None:
    proc = run_cli("completion", shell)
    assert proc.returncode == 0, proc.stderr
    assert "_IMAGELINT_COMPLETE" in proc.stdout and "complete_" in proc.stdout


def test_completion_of_an_unknown_shell_is_one_line_exit_2() -> None:
    proc = run_cli("completion", "tcsh")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "bash, zsh" in proc.stderr


def test_fail_on_completes_every_severity_and_nothing_else() -> None:
    env = {
        "_IMAGELINT_COMPLETE": "complete_bash",
        "COMP_WORDS": "imagelint audit --fail-on ",
        "COMP_CWORD": "3",
    }
    proc = run_cli(env=env)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split()) == sorted(["info", "low", "medium", "high", "critical"])
