"""The options commands share, declared once.

``with_run_options`` gives a rule-running command (audit, soak, ami check, fleet) the options every
one of them takes (config, rule packs, formats, --fail-on, --select/--ignore, SARIF anchor, GitHub
mode) and hands the command one built ``RunOptions`` as its ``run`` argument, so a new shared option
is one entry here, not an edit of every command. The other aliases are options several commands
take alike (region, partition, concurrency of the EBS reads).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from imagelint.cli.helptext import DEFAULT_FAIL_ON_TOKEN, FORMATS_TOKEN, SEVERITIES_TOKEN
from imagelint.errors import UsageError

if TYPE_CHECKING:
    from imagelint.session import RunOptions

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


FormatsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--format",
        "-f",
        help=f"FORMAT or FORMAT:PATH, FORMAT one of: {FORMATS_TOKEN}; repeatable. "
        "Default: text to stdout (in GitHub Actions: text and github annotations).",
    ),
]


def complete_severity(incomplete: str) -> list[str]:
    """Shell completion of a severity (``--fail-on``): the severities, not file names."""
    from imagelint.rulepacks import Severity

    return [s.value for s in Severity if s.value.startswith(incomplete)]


FailOnOpt = Annotated[
    str | None,
    typer.Option(
        "--fail-on",
        metavar="SEVERITY",
        autocompletion=complete_severity,
        help=f"Lowest severity that fails, one of: {SEVERITIES_TOKEN}. "
        f"Default: fail-on in the config, else {DEFAULT_FAIL_ON_TOKEN}.",
    ),
]
SelectOpt = Annotated[
    list[str] | None,
    typer.Option("--select", help="Run only these rules (id, name, tag:X, pack:X; globs; comma-separated)."),
]
IgnoreOpt = Annotated[list[str] | None, typer.Option("--ignore", help="Skip these rules (as --select).")]
SarifAnchorOpt = Annotated[
    Path | None,
    typer.Option(
        "--sarif-anchor",
        exists=True,
        dir_okay=False,
        help="Repository file SARIF results point at (e.g. the Packer template); "
        "default: the config file when it is inside the repository.",
    ),
]
RegionOpt = Annotated[str | None, typer.Option("--region", help="AWS region (default: the environment's).")]
ConcurrencyOpt = Annotated[
    int,
    typer.Option(
        "--concurrency", min=1, max=64, help="ebs:snap-… and --mode snapshot: blocks fetched at once."
    ),
]
PartitionOpt = Annotated[
    int | None,
    typer.Option(
        "--partition",
        metavar="N",
        help="Disk image: read the root filesystem from partition N (default: the one with /etc/os-release).",
    ),
]
AllowPartialRootOpt = Annotated[
    bool,
    typer.Option(
        "--allow-partial-root",
        help="Audit a tree without the marks of an operating system's root (an os-release, a /usr "
        "directory, an init: /sbin/init, /usr/sbin/init or [/usr]/lib/systemd/systemd) as it is; "
        "without it such a target is inconclusive (exit 3): an empty directory or a failed mount "
        "must not pass.",
    ),
]
SudoOpt = Annotated[
    bool,
    typer.Option(
        "--sudo",
        help="ssh://: run the collector with `sudo -n` (a login that is not root; sudo must not ask "
        "for a password).",
    ),
]


HostsOpt = Annotated[
    Path | None,
    typer.Option(
        "--hosts",
        metavar="FILE",
        dir_okay=False,
        help="Many running hosts: FILE holds one ssh://[USER@]HOST[:PORT] a line (# comments); one "
        "report with a row per host, the exit code the verdict over all of them.",
    ),
]
ParallelOpt = Annotated[
    int, typer.Option("--parallel", min=1, max=64, help="--hosts: hosts collecting at once.")
]


def ssh_only(spec: str, sudo: bool) -> None:
    """--sudo is for a host reached over ssh, nothing else."""
    from imagelint.collector.ssh.spec import is_ssh

    if sudo and not is_ssh(spec):
        raise UsageError("--sudo applies to a host reached over ssh (ssh://[USER@]HOST[:PORT])")


GithubOpt = Annotated[
    bool | None,
    typer.Option(
        "--github/--no-github",
        help="GitHub Actions mode: annotations by default, step summary and outputs. "
        "Default: on when GITHUB_ACTIONS=true.",
    ),
]


# name, annotation (with its typer.Option) and default of each option with_run_options adds
RUN_PARAMETERS: tuple[tuple[str, Any, Any], ...] = (
    ("config", ConfigOpt, None),
    ("rules", RulesOpt, None),
    ("no_builtin_rules", NoBuiltinOpt, False),
    ("formats", FormatsOpt, None),
    ("fail_on", FailOnOpt, None),
    ("select", SelectOpt, None),
    ("ignore", IgnoreOpt, None),
    ("sarif_anchor", SarifAnchorOpt, None),
    ("github", GithubOpt, None),
)


def with_run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add the options of ``RUN_PARAMETERS`` to the command ``func``; it receives them as ``run``.

    typer reads a command's options from its signature, so the wrapper's signature is the command's
    own parameters (``run`` left out) followed by the shared ones."""
    own = [
        parameter.replace(annotation=_evaluated(parameter.annotation, func))
        for parameter in inspect.signature(func).parameters.values()
        if parameter.name != "run"
    ]
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        for name, annotation, default in RUN_PARAMETERS
    ]

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name, _, _ in RUN_PARAMETERS}
        return func(**kwargs, run=build_run_options(**values))

    parameters = [*own, *shared]
    wrapper.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    return wrapper


def _evaluated(annotation: Any, func: Callable[..., Any]) -> Any:
    """A string annotation (``from __future__ import annotations``) as the object it names; what
    ``inspect.signature(eval_str=True)`` does, but not for ``run``, whose type is imported only
    for type checking (importing the session at start-up would slow every command)."""
    return eval(annotation, func.__globals__) if isinstance(annotation, str) else annotation


def build_run_options(
    *,
    config: Path | None = None,
    rules: list[Path] | None = None,
    no_builtin_rules: bool = False,
    formats: list[str] | None = None,
    fail_on: str | None = None,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    sarif_anchor: Path | None = None,
    github: bool | None = None,
) -> RunOptions:
    """The run options from the shared options' values.

    GitHub Actions mode is on by default under Actions: the log gets the text report, the workflow
    gets annotations, the step summary and outputs."""
    import os

    from imagelint.formats.outputs import OutputSpec
    from imagelint.session import RunOptions

    options = RunOptions(
        config_path=config,
        extra_rules=rules or [],
        builtin=not no_builtin_rules,
        outputs=[OutputSpec.parse(f) for f in (formats or ["text"])],
        fail_on=fail_on,
        select=select or [],
        ignore=ignore or [],
    )
    options.sarif_anchor = str(sarif_anchor) if sarif_anchor else None
    options.github = os.environ.get("GITHUB_ACTIONS") == "true" if github is None else github
    if options.github and not formats:
        options.outputs = [OutputSpec("text"), OutputSpec("github")]
    return options


# --- AWS commands (ami check, ami cleanup, fleet) ----------------------------------------------

RoleArnOpt = Annotated[
    str | None,
    typer.Option(
        "--role-arn",
        metavar="ARN",
        help="Assume this role for the run (the caller's own credentials are used for sts:AssumeRole "
        "only); its credentials refresh themselves, so a long run still cleans up.",
    ),
]
PollOpt = Annotated[str, typer.Option("--poll", help="Polling interval of the AWS calls that wait.")]
ProfileNamespaceOpt = Annotated[
    str | None,
    typer.Option(
        "--profile-namespace",
        help="/PATH/PREFIX of --create-profile's roles and instance profiles (default "
        "/imagelint/imagelint-), for an organization's naming rule; give ami policies the same.",
    ),
]
ReportPrefixOpt = Annotated[str, typer.Option("--report-prefix", help="Key prefix in the report bucket.")]
SoakIntervalOpt = Annotated[str, typer.Option("--soak-interval", help="Time between soak samples.")]
DocumentOpt = Annotated[
    str | None,
    typer.Option(
        "--document",
        metavar="NAME[:VERSION]",
        help="Send this SSM document (default AWS-RunShellScript), e.g. your organization's pinned copy; "
        "it must take AWS-RunShellScript's parameters. The runner policy must name it (ami policies "
        "--document).",
    ),
]
KeepBundlesOpt = Annotated[
    bool,
    typer.Option(
        "--keep-bundles",
        help="Leave each instance's bundle in the bucket once read (by default it is deleted: it holds "
        "files such as the image's /etc/shadow).",
    ),
]
