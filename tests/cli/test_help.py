"""Every command's ``--help`` stands alone at 80 columns: exit codes, full --fail-on choices, derived
lists, no line longer than the terminal, nothing cut, the same layout under NO_COLOR."""

from __future__ import annotations

import re

import pytest

from imagelint.errors import ExitCode
from imagelint.formats import FORMATS
from imagelint.rulepacks import Severity
from tests.support import run_cli

COMMANDS = [
    ("audit", True),
    ("units", False),
    ("soak", True),
    ("collector", False),
    ("ami", False),
    ("ami check", True),
    ("ami cleanup", False),
    ("fleet", True),
    ("rules", False),
    ("rules list", False),
    ("rules show", False),
    ("rules validate", False),
    ("schema", False),
    ("schema rules", False),
    ("docs", False),
    ("docs rules", False),
    ("diff", False),
    ("schema diff", False),
    ("fix", True),
    ("watch", False),
    ("ami policies", False),
]
CHOICES = "|".join(s.value for s in Severity)


def _help(command: str, **env: str) -> str:
    proc = run_cli(*command.split(), "--help", env={"COLUMNS": "80", **env})
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stdout


@pytest.mark.parametrize(("command", "has_fail_on"), COMMANDS)
def test_help_lists_exit_codes_and_fail_on_choices_whole(command: str, has_fail_on: bool) -> None:
    text = _help(command)
    assert "Exit codes:" in text
    assert re.search(r"^\s*0  \S", text, re.M), text
    assert bool(re.search(r"--fail-on\s+SEVERITY", text)) == has_fail_on
    if has_fail_on:
        assert CHOICES in text  # on one line: not cut by the wrapper
        for severity in Severity:
            assert severity.value in text
    assert "\b" not in text and "{SEVERITIES}" not in text and "{FORMATS}" not in text
    assert all(len(line) <= 80 for line in text.splitlines()), [x for x in text.splitlines() if len(x) > 80]
    assert not re.search(r"\w…\s*$", text, re.M)  # no word cut short at a line's end


@pytest.mark.parametrize("command", ["audit", "ami check"])
def test_no_color_keeps_the_layout(command: str) -> None:
    assert _help(command, NO_COLOR="1") == _help(command)


def test_option_names_are_never_broken_at_a_hyphen() -> None:
    text = _help("ami check")
    assert "--create-profile" in text and "--create-\n" not in text


@pytest.mark.parametrize("command", ["audit", "soak", "ami", "ami check", "fleet", "diff"])
def test_every_exit_code_is_explained(command: str) -> None:
    text = _help(command)
    for code in ExitCode:
        assert re.search(rf"^\W*{int(code)}  \w", text, re.M), (code, text)


def test_formats_in_help_come_from_the_registry() -> None:
    text = " ".join(_help("audit").replace("│", " ").split())
    assert ", ".join(FORMATS) in text


def test_examples_keep_their_lines_and_prose_is_reflowed() -> None:
    text = "\n".join(line.rstrip() for line in _help("soak").splitlines())
    assert "  imagelint soak -d 5m -f text -f json:soak.json --fail-on high\n" in text
    # the docstring breaks after "a robust slope with a": rewrapped at 80 columns, the line goes on
    assert "a robust slope with a significance" in text


def test_reflow_joins_prose_and_keeps_indented_blocks() -> None:
    from imagelint.cli.helptext import reflow

    doc = "Title line.\n\n    One sentence\n    over two lines.\n\n      cmd --a\n      cmd --b\n    "
    assert reflow(doc) == "Title line.\n\nOne sentence over two lines.\n\n\b\n  cmd --a\n  cmd --b"


@pytest.mark.parametrize(
    "argv",
    [
        *([*c.split(), "--help"] for c, _ in COMMANDS),
        ["watch", "--help"],
        ["audit", "--no-such-option"],
        ["--debug", "rules", "--help"],
        ["rules", "nope"],
    ],
)
def test_the_narrowed_application_answers_as_the_whole(argv: list[str]) -> None:
    """``for_command_line`` builds only the command the line names: same output, same exit code."""
    from typer.testing import CliRunner

    from imagelint.cli.app import load_commands
    from imagelint.cli.application import for_command_line

    app = load_commands()
    narrowed = for_command_line(argv)
    assert narrowed is not app and len(narrowed.registered_commands) + len(narrowed.registered_groups) == 1
    runner = CliRunner()
    env = {"COLUMNS": "100", "TERMINAL_WIDTH": "100", "NO_COLOR": "1"}
    whole = runner.invoke(app, argv, prog_name="imagelint", env=env)
    alone = runner.invoke(narrowed, argv, prog_name="imagelint", env=env)
    assert (alone.exit_code, alone.output) == (whole.exit_code, whole.output)


@pytest.mark.parametrize("argv", [[], ["--help"], ["nope"], ["--debug"]])
def test_a_line_that_names_no_command_gets_the_whole_application(argv: list[str]) -> None:
    from imagelint.cli.app import load_commands
    from imagelint.cli.application import for_command_line

    app = load_commands()
    assert for_command_line(argv) is app


@pytest.mark.parametrize("group", ["", "ami", "rules", "schema", "docs"])
def test_command_lists_are_whole_at_80_columns(group: str) -> None:
    listed = _help(group).split("\nCommands:\n", 1)[1]
    assert listed.strip() and not re.search(r"\.\.\.$", listed, re.M), listed
