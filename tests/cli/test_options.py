"""Shared options are declared once (imagelint.cli.options) and every rule-running command has them;
`ami cleanup` is a subcommand of its own, and `imagelint ami AMI…` still means `ami check AMI…`."""

from __future__ import annotations

import typer

from imagelint.cli.app import load_commands
from imagelint.cli.options import RUN_PARAMETERS, build_run_options
from tests.support import run_cli

app = load_commands()  # every command, as the root's help lists them

RULE_RUNNING = ["audit", "soak", "ami check", "fleet"]


def _command(path: str) -> typer.core.TyperCommand:
    group = typer.main.get_command(app)
    node = group
    for name in path.split():
        node = node.commands[name]  # type: ignore[attr-defined]
    return node  # type: ignore[return-value]


def _option_names(path: str) -> set[str]:
    return {param.name for param in _command(path).params if param.name}


def test_every_rule_running_command_has_all_shared_options() -> None:
    shared = {name for name, _, _ in RUN_PARAMETERS}
    for path in RULE_RUNNING:
        assert shared <= _option_names(path), path


def test_the_shared_options_are_the_same_objects_everywhere() -> None:
    # one declaration: the same --fail-on help and flags on every command
    def fail_on(path: str) -> tuple[tuple[str, ...], str | None]:
        param = next(p for p in _command(path).params if p.name == "fail_on")
        return tuple(param.opts), param.help

    assert len({fail_on(path) for path in RULE_RUNNING}) == 1


def test_aws_commands_share_role_arn_and_poll() -> None:
    for path in ["ami check", "ami cleanup", "fleet"]:
        assert {"role_arn", "poll", "region"} <= _option_names(path), path


def test_cleanup_is_its_own_command() -> None:
    assert "fail_on" not in _option_names("ami cleanup")
    assert not {"older_than", "dry_run"} & _option_names("ami check")
    proc = run_cli("ami", "cleanup", "ami-0123456789abcdef0")
    assert proc.returncode == 2 and "unexpected extra argument" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_ami_id_still_starts_check() -> None:
    # a bad option of `check` is reported by `check`: the AMI id was routed there
    proc = run_cli("ami", "ami-0123456789abcdef0", "--no-such-option")
    assert proc.returncode == 2
    assert "imagelint ami check" in proc.stderr and "--no-such-option" in proc.stderr
    proc = run_cli("ami", "--mode", "bogus", "ami-0123456789abcdef0")
    assert proc.returncode == 2 and "--mode 'bogus'" in proc.stderr


def test_built_run_options_follow_the_values(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    options = build_run_options(fail_on="high", select=["IL1*"], no_builtin_rules=True)
    assert (options.fail_on, options.select, options.builtin, options.github) == (
        "high",
        ["IL1*"],
        False,
        False,
    )
    assert [o.format for o in options.outputs] == ["text"]
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert [o.format for o in build_run_options().outputs] == ["text", "github"]
    assert [o.format for o in build_run_options(formats=["json"]).outputs] == ["json"]
