"""The typer application: audit, rules, schema and docs commands.

Each command turns an ImageLintError into one line on stderr and its documented exit code; no
traceback reaches the user for anything they can cause.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from imagelint import __version__
from imagelint.errors import ExitCode, ImageLintError, UsageError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES_HELP = (
    "Exit codes: 0 pass · 1 findings at or above --fail-on · 2 bad usage, rule pack or config · "
    "3 inconclusive (the target or data in it could not be read)."
)

app = typer.Typer(
    name="imagelint",
    help="Stop bad machine images (AMIs, VM base images) before they ship.\n\n" + EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
rules_app = typer.Typer(help="List, show and validate rules.", no_args_is_help=True)
schema_app = typer.Typer(help="Print the JSON Schemas of rule packs, the config file and the JSON report.")
docs_app = typer.Typer(help="Generate documentation from the rule packs.", no_args_is_help=True)
app.add_typer(rules_app, name="rules")
app.add_typer(schema_app, name="schema")
app.add_typer(docs_app, name="docs")


def fail(message: str, code: ExitCode) -> typer.Exit:
    typer.echo(f"imagelint: error: {message}", err=True)
    return typer.Exit(int(code))


def friendly(func: F) -> F:
    """Turn ImageLintError into one line on stderr and its exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ImageLintError as exc:
            raise fail(str(exc), exc.exit_code) from None
        except KeyboardInterrupt:
            raise fail("interrupted", ExitCode.INCONCLUSIVE) from None

    return wrapper  # type: ignore[return-value]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"imagelint {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    pass


ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="Config file (default: .imagelint.yaml in the working directory)."),
]
RulesOpt = Annotated[
    list[Path] | None,
    typer.Option("--rules", "-r", help="Extra rule pack (file or directory); repeatable."),
]
NoBuiltinOpt = Annotated[
    bool, typer.Option("--no-builtin-rules", help="Do not load the built-in rule packs.")
]


@app.command()
@friendly
def audit(
    root: Annotated[Path, typer.Argument(help="Root directory of the mounted image.")] = Path("/"),
    config: ConfigOpt = None,
    rules: RulesOpt = None,
    no_builtin_rules: NoBuiltinOpt = False,
    formats: Annotated[
        list[str] | None,
        typer.Option(
            "--format",
            "-f",
            help="FORMAT or FORMAT:PATH (text, json); repeatable. Default: text to stdout.",
        ),
    ] = None,
    fail_on: Annotated[
        str | None,
        typer.Option("--fail-on", help="Lowest severity that fails: info|low|medium|high|critical."),
    ] = None,
    select: Annotated[
        list[str] | None, typer.Option("--select", help="Run only these rules (id, name, tag:X).")
    ] = None,
    ignore: Annotated[
        list[str] | None, typer.Option("--ignore", help="Skip these rules (id, name, tag:X).")
    ] = None,
    show_waived: Annotated[
        bool, typer.Option("--show-waived", help="List waived findings in text output.")
    ] = False,
) -> None:
    """Audit a mounted image (a root filesystem directory) offline.

    Reads the image and never writes to it. Examples:

      imagelint audit /mnt/image

      imagelint audit /mnt/image -f text -f json:report.json --fail-on high

      imagelint audit /mnt/image -c .imagelint.yaml -r my-rules/ --show-waived
    """
    from imagelint.session import OutputSpec, run_audit

    outputs = [OutputSpec.parse(f) for f in (formats or ["text"])]
    verdict = run_audit(
        root=root,
        config_path=config,
        extra_rules=rules or [],
        builtin=not no_builtin_rules,
        outputs=outputs,
        fail_on=fail_on,
        select=select or [],
        ignore=ignore or [],
        show_waived=show_waived,
    )
    raise typer.Exit(int(verdict.exit_code))


@rules_app.command("list")
@friendly
def rules_list(
    config: ConfigOpt = None,
    rules: RulesOpt = None,
    no_builtin_rules: NoBuiltinOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List every loaded rule: id, severity, scope, name and title.

    Example: imagelint rules list --rules my-pack.yaml
    """
    from imagelint.session import load_rules

    packs, _ = load_rules(config, rules or [], builtin=not no_builtin_rules)
    entries = [
        {
            "id": r.id,
            "name": r.name,
            "severity": r.severity.value,
            "scope": list(r.scopes),
            "pack": r.pack,
            "title": r.title,
        }
        for p in packs
        for r in p.rules
    ]
    if as_json:
        typer.echo(json.dumps(entries, indent=2))
        return
    for e in entries:
        typer.echo(f"{e['id']:<7} {e['severity']:<8} {','.join(e['scope']):<10} {e['name']:<40} {e['title']}")


@rules_app.command("show")
@friendly
def rules_show(
    rule_id: Annotated[str, typer.Argument(help="Rule id or name, e.g. IL101.")],
    config: ConfigOpt = None,
    rules: RulesOpt = None,
) -> None:
    """Show one rule in full: rationale, check, message, remediation, references.

    Example: imagelint rules show IL101
    """
    from imagelint.docs import render_rule
    from imagelint.session import load_rules

    packs, _ = load_rules(config, rules or [], builtin=True)
    for rule in (r for p in packs for r in p.rules):
        if rule_id in (rule.id, rule.name):
            typer.echo(render_rule(rule))
            return
    raise UsageError(f"no rule {rule_id!r} is loaded (see `imagelint rules list`)")


@rules_app.command("validate")
@friendly
def rules_validate(
    files: Annotated[list[Path], typer.Argument(help="Rule pack files or directories.")],
) -> None:
    """Validate rule packs without running them (exit 0 valid, 2 invalid, with file:line:column).

    Example: imagelint rules validate rules/my-pack.yaml
    """
    from imagelint.rulepacks import builtin_pack_paths, load_packs

    # Loading with the built-ins catches ids that collide with them.
    packs = load_packs(files, builtin=builtin_pack_paths())
    mine = [p for p in packs if not p.builtin]
    typer.echo(f"{sum(len(p.rules) for p in mine)} rule(s) in {len(mine)} pack(s): valid")


@schema_app.command("rules")
def schema_rules() -> None:
    """Print the JSON Schema of a rule pack (composed from every check kind's parameters)."""
    from imagelint.rulepacks.schema import rules_schema

    typer.echo(json.dumps(rules_schema(), indent=2))


@schema_app.command("config")
def schema_config() -> None:
    """Print the JSON Schema of the configuration file (.imagelint.yaml)."""
    from imagelint.config import config_schema

    typer.echo(json.dumps(config_schema(), indent=2))


@schema_app.command("report")
def schema_report() -> None:
    """Print the JSON Schema of the JSON report (--format json)."""
    from imagelint.report.schema import report_schema

    typer.echo(json.dumps(report_schema(), indent=2))


@docs_app.command("rules")
@friendly
def docs_rules(
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    check: Annotated[bool, typer.Option("--check", help="Exit 1 if OUTPUT is not up to date.")] = False,
) -> None:
    """Generate the rule reference (docs/rules.md) from the built-in rule packs.

    Example: imagelint docs rules -o docs/rules.md
    """
    from imagelint.docs import rules_reference

    text = rules_reference()
    if output is None:
        typer.echo(text, nl=False)
        return
    if check:
        current = output.read_text(encoding="utf-8") if output.exists() else ""
        if current != text:
            raise fail(f"{output} is out of date; run: imagelint docs rules -o {output}", ExitCode.FAIL)
        return
    output.write_text(text, encoding="utf-8")


def run() -> None:
    app(prog_name="imagelint")
    sys.exit(0)
