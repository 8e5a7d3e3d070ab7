"""Help text of the commands: reflowed prose, verbatim examples, exit codes, derived option choices.

Help is click's plain layout (typer's rich panels are off: at 80 columns they cut long words with
"…" and squeeze descriptions into a narrow column). Click wraps each prose paragraph to the terminal;
a paragraph marked with click's ``\\b`` line (examples, the exit-code table) is kept line for line.
Here each prose paragraph is joined into one line, and every paragraph whose lines are all indented
is marked so.

Option help may name ``{SEVERITIES}``, ``{FORMATS}`` or ``{DEFAULT_FAIL_ON}``: they are filled in
from ``imagelint.rulepacks.Severity``, ``imagelint.formats.FORMATS`` and the config's default when
help is shown, so that commands which never print help do not import those modules.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import typer
from typer import _click as click  # typer < 0.29 vendors click: its own Context and Option
from typer._click import _textwrap
from typer.core import TyperArgument, TyperCommand, TyperOption

from imagelint.errors import ExitCode

F = TypeVar("F", bound=Callable[..., Any])

# The one table of exit codes (docs/exit-codes.md); commands pick the codes they can end with and
# may say what a code means for them.
EXIT_CODES: Mapping[ExitCode, str] = {
    ExitCode.PASS: "pass: no finding at or above --fail-on",
    ExitCode.FAIL: "fail: a finding at or above --fail-on (or an expired waiver)",
    ExitCode.USAGE: "bad usage, rule pack or config (the message names file:line:column)",
    ExitCode.INCONCLUSIVE: "inconclusive: the target, or data in it, could not be read",
}
SUCCESS: Mapping[ExitCode, str] = {ExitCode.PASS: "success"}  # for commands that judge nothing


class _WholeOptionNames(_textwrap.TextWrapper):
    """Click's wrapper, never breaking a line inside --an-option-name (textwrap breaks at hyphens)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("break_on_hyphens", False)
        super().__init__(*args, **kwargs)


_textwrap.TextWrapper = _WholeOptionNames  # type: ignore[misc]  # click.formatting looks it up per call
EXIT_CODE_WIDTH = 76  # the exit-code table, kept line for line, fits 80 columns with help's indent
VERBATIM = "\b\n"  # click: the paragraph that follows is not rewrapped
SEVERITIES_TOKEN = "{SEVERITIES}"
FORMATS_TOKEN = "{FORMATS}"
DEFAULT_FAIL_ON_TOKEN = "{DEFAULT_FAIL_ON}"


def exit_codes_block(
    codes: Sequence[ExitCode] = tuple(ExitCode), meanings: Mapping[ExitCode, str] | None = None
) -> str:
    """The "Exit codes" paragraph, one line per code. Not indented: typer dedents a group's help
    (``inspect.cleandoc``), which would make a group's table differ from a command's."""
    meanings = {**EXIT_CODES, **(meanings or {})}
    rows = (
        textwrap.fill(f"{int(code)}  {meanings[code]}", EXIT_CODE_WIDTH, subsequent_indent="   ")
        for code in codes
    )
    return VERBATIM + "Exit codes:\n" + "\n".join(rows)


def reflow(doc: str) -> str:
    """Join each prose paragraph into one line; keep paragraphs whose lines are all indented."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    out = []
    for paragraph in paragraphs:
        lines = paragraph.split("\n")
        if all(line.startswith(" ") for line in lines if line.strip()):
            out.append(VERBATIM + paragraph)
        else:
            out.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(out)


def command_help(
    doc: str | None,
    codes: Sequence[ExitCode] = tuple(ExitCode),
    meanings: Mapping[ExitCode, str] | None = None,
) -> str:
    """A command's whole help: its docstring reflowed, then its exit codes."""
    return reflow(doc or "") + "\n\n" + exit_codes_block(codes, meanings)


def expand(text: str) -> str:
    """Fill in the derived lists named in ``text`` (imports only what is named)."""
    if SEVERITIES_TOKEN in text:
        from imagelint.rulepacks.model import Severity

        text = text.replace(SEVERITIES_TOKEN, "|".join(s.value for s in Severity))
    if FORMATS_TOKEN in text:
        from imagelint.formats import FORMATS

        text = text.replace(FORMATS_TOKEN, ", ".join(FORMATS))
    if DEFAULT_FAIL_ON_TOKEN in text:
        from imagelint.config import DEFAULT_FAIL_ON

        text = text.replace(DEFAULT_FAIL_ON_TOKEN, DEFAULT_FAIL_ON.value)
    return text


class HelpCommand(TyperCommand):
    """A typer command whose help and option help are expanded (``expand``) when help is shown."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.help = expand(self.help or "")
        for param in self.params:
            if isinstance(param, TyperOption | TyperArgument) and param.help:
                param.help = expand(param.help)
        super().format_help(ctx, formatter)


def command(
    app: typer.Typer,
    name: str | None = None,
    *,
    codes: Sequence[ExitCode] = tuple(ExitCode),
    meanings: Mapping[ExitCode, str] | None = None,
    short: str | None = None,
) -> Callable[[F], F]:
    """``app.command`` with the help built by ``command_help`` from the function's docstring; ``short``
    is its line in the group's command list (kept under 60 characters, so 80 columns never cut it)."""

    def register(func: F) -> F:
        help_text = command_help(func.__doc__, codes, meanings)
        decorated: F = app.command(name, cls=HelpCommand, help=help_text, short_help=short)(func)
        return decorated

    return register
