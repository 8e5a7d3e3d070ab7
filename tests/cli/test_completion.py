"""Shell completion: the script ``--show-completion`` prints is the one ``--install-completion``
installs, and the program answers it with commands, subcommands and options."""

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
    ],
)
def test_the_program_answers_completion(words: str, expected: list[str]) -> None:
    assert _complete(words) == expected


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_show_completion_prints_a_script_that_calls_back(shell: str) -> None:
    proc = run_cli("--show-completion", shell)
    assert proc.returncode == 0, proc.stderr
    assert "_IMAGELINT_COMPLETE=complete_" in proc.stdout
