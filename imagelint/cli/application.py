"""The typer application itself: the root command, its sub-groups, and how a command fails.

Every command module (``cli/app.py``, ``cli/aws.py``, ``cli/diff.py``, ``cli/watch.py``) registers
on the objects here; only ``cli/app.py`` imports the others (``load_commands``: those the command line
needs), so the CLI has no import circle.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Annotated, Literal, ParamSpec, TypeVar

import typer

from imagelint import __version__, stderr
from imagelint.cli.helptext import SUCCESS, exit_codes_block
from imagelint.errors import ExitCode, ImageLintError

P = ParamSpec("P")
R = TypeVar("R")

# click's plain help, not typer's rich panels (which cut words with "…" at 80 columns): prose is
# wrapped to the terminal, blocks marked by imagelint.cli.helptext are kept line for line.
MARKUP: Literal["rich"] | None = None
USAGE_ONLY = (ExitCode.PASS, ExitCode.USAGE)
DOCS_CODES = (ExitCode.PASS, ExitCode.FAIL, ExitCode.USAGE)
DOCS_MEANINGS = {ExitCode.PASS: "written, or up to date", ExitCode.FAIL: "--check: OUTPUT is out of date"}

app = typer.Typer(
    name="imagelint",
    help="Stop bad machine images (AMIs, VM base images) before they ship.\n\n" + exit_codes_block(),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=MARKUP,
    context_settings={"help_option_names": ["-h", "--help"]},
)
rules_app = typer.Typer(
    help="List, show and validate rules.\n\n" + exit_codes_block(USAGE_ONLY, SUCCESS),
    no_args_is_help=True,
    rich_markup_mode=MARKUP,
)
schema_app = typer.Typer(
    short_help="Print the JSON Schemas: rule packs, config, reports.",
    help="Print the JSON Schemas of rule packs, the config file, the units listing and the JSON report."
    "\n\n" + exit_codes_block(USAGE_ONLY, SUCCESS),
    rich_markup_mode=MARKUP,
)
docs_app = typer.Typer(
    help="Generate documentation from the rule packs.\n\n" + exit_codes_block(DOCS_CODES, DOCS_MEANINGS),
    no_args_is_help=True,
    rich_markup_mode=MARKUP,
)
app.add_typer(rules_app, name="rules")
app.add_typer(schema_app, name="schema")
app.add_typer(docs_app, name="docs")


def for_command_line(argv: list[str]) -> typer.Typer:
    """The application with only the command or group that ``argv`` names, when it names one; else
    the whole of it (the root's help, an unknown command and the suggestions for it).

    typer builds a click command from the signature of every registered command on each run, before
    it runs one: a narrowed application builds only the command that runs. The root's options are
    flags, so the first word that is not an option is the command."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    commands = [c for c in app.registered_commands if _command_name(c) == word]
    groups = [g for g in app.registered_groups if g.name == word]
    if not commands and not groups:
        return app
    narrowed = copy.copy(app)
    narrowed.registered_commands = commands
    narrowed.registered_groups = groups
    return narrowed


def _command_name(info: typer.models.CommandInfo) -> str | None:
    if info.name is not None:
        return info.name
    return None if info.callback is None else typer.main.get_command_name(info.callback.__name__)


def fail(message: str, code: ExitCode) -> typer.Exit:
    stderr.error(message)
    return typer.Exit(int(code))


def friendly(func: Callable[P, R]) -> Callable[P, R]:
    """Turn ImageLintError into one line on stderr and its exit code."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except ImageLintError as exc:
            raise fail(str(exc), exc.exit_code) from None
        except KeyboardInterrupt:
            raise fail("interrupted", ExitCode.INCONCLUSIVE) from None

    return wrapper


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
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help="On an internal error, print the traceback after the one-line message "
            "(also IMAGELINT_DEBUG=1). Accepted anywhere on the command line.",
        ),
    ] = False,
) -> None:
    pass
