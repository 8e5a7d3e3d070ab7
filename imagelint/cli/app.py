"""The commands audit, units, soak, collector, rules, schema and docs; it registers the others (ami, fleet,
diff, fix, vm, watch) by importing their modules, only when the command line may run one of them
(:func:`load_commands`: an audit imports no AWS, VM or watch command module).

Each command turns an ImageLintError into one line on stderr and its documented exit code; no
traceback reaches the user for anything they can cause.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from imagelint import outputfile, stderr
from imagelint.cli.application import (
    DOCS_CODES,
    DOCS_MEANINGS,
    USAGE_ONLY,
    app,
    docs_app,
    fail,
    for_command_line,
    friendly,
    rules_app,
    schema_app,
)
from imagelint.cli.closedpipe import quiet_on_closed_pipe
from imagelint.cli.helptext import SUCCESS, command
from imagelint.cli.options import (
    AllowPartialRootOpt,
    ConcurrencyOpt,
    ConfigOpt,
    HostsOpt,
    NoBuiltinOpt,
    ParallelOpt,
    PartitionOpt,
    RegionOpt,
    RulesOpt,
    SudoOpt,
    ssh_only,
    with_run_options,
)
from imagelint.errors import ExitCode, ImageLintError, UsageError
from imagelint.formats.outputs import clear_stale

COMPLETION_SHELLS = ("bash", "zsh", "fish", "powershell")

if TYPE_CHECKING:
    from imagelint.session import RunOptions


@command(app, short="Audit an image offline, or this host with --live.")
@friendly
@with_run_options
def audit(
    root: Annotated[
        str,
        typer.Argument(
            help="Root directory of the mounted image, a disk image file, a bundle file (.tar.gz) "
            "from the remote collector, or a running host: ssh://[USER@]HOST[:PORT].",
            show_default=True,
        ),
    ] = "/",
    show_waived: Annotated[
        bool, typer.Option("--show-waived", help="List waived findings in text output.")
    ] = False,
    journal: Annotated[
        Path | None,
        typer.Option("--journal", help="Read this journal directory or file instead of the image's own."),
    ] = None,
    require_journal: Annotated[
        bool,
        typer.Option(
            "--require-journal", help="No journal at all is inconclusive (exit 3), not 'not applicable'."
        ),
    ] = False,
    live: Annotated[
        bool,
        typer.Option(
            "--live",
            help="Audit the running host (root /): also run the host-scope rules on the service "
            "manager's unit states (failed units, restart loops) from one `systemctl show`.",
        ),
    ] = False,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            metavar="OLD-REPORT.json",
            help="The previous image's JSON report: mark each finding new, unchanged or absent "
            "(JSON baseline_state, SARIF baselineState), matched by rule id and subject.",
        ),
    ] = None,
    fail_on_new: Annotated[
        bool,
        typer.Option("--fail-on-new", help="With --baseline: only findings the baseline lacks can fail."),
    ] = False,
    partition: PartitionOpt = None,
    region: RegionOpt = None,
    concurrency: ConcurrencyOpt = 16,
    sudo: SudoOpt = False,
    hosts: HostsOpt = None,
    parallel: ParallelOpt = 8,
    allow_partial_root: AllowPartialRootOpt = False,
    *,
    run: RunOptions,
) -> None:
    """Audit a mounted image (a root filesystem directory) offline, or the running host with --live.

    Reads the image and never writes to it. The image may also be a disk image file (raw, qcow2,
    vmdk, vhd, vhdx) or ebs:snap-… (an EBS snapshot read in place through the EBS direct APIs; see
    `imagelint ami check --help` for the IAM policy). With --baseline OLD-REPORT.json each finding is
    marked new or unchanged and the baseline's findings this image lacks are listed as absent;
    --fail-on-new then fails only on new findings (an expired waiver still fails), so an old
    image's backlog does not block adoption. Examples:

      imagelint audit /mnt/image

      imagelint audit /mnt/image -f text -f json:report.json --fail-on high

      imagelint audit /mnt/image -c .imagelint.yaml -r my-rules/ --show-waived

      imagelint audit /mnt/new --baseline last-release.json --fail-on-new

      imagelint audit ebs:snap-0123456789abcdef0 --region eu-west-1

      imagelint audit ssh://admin@build-host.lab --sudo

      imagelint audit --hosts lab-hosts.txt --sudo --parallel 8 -f json:hosts.json
    """
    from imagelint.openers import OpenOptions
    from imagelint.session import JournalOptions, run_audit

    options = run
    options.show_waived, options.baseline, options.fail_on_new = show_waived, baseline, fail_on_new
    if hosts is not None:
        if root != "/" or live:
            raise UsageError("give --hosts FILE or a target, not both")
        from imagelint.commands.hosts import run_hosts

        raise typer.Exit(int(run_hosts(hosts, options, sudo=sudo, parallel=parallel).exit_code))
    ssh_only(root, sudo)
    opening = OpenOptions(
        partition=partition,
        region=region,
        concurrency=concurrency,
        live=live,
        interactive=sys.stderr.isatty(),
        sudo=sudo,
        partial_root=allow_partial_root,
    )
    verdict = run_audit(root, options, JournalOptions(journal, require_journal), opening)
    raise typer.Exit(int(verdict.exit_code))


@command(
    app,
    codes=(ExitCode.PASS, ExitCode.USAGE, ExitCode.INCONCLUSIVE),
    meanings={
        ExitCode.PASS: "listed (problems found in the image are listed too)",
        ExitCode.INCONCLUSIVE: "inconclusive: the image root does not exist, is not a directory, or "
        "lacks the marks of an operating system's root (see --allow-partial-root)",
    },
    short="List an image's systemd units and its boot chain.",
)
@friendly
def units(
    root: Annotated[
        str,
        typer.Argument(
            help="Root directory of the mounted image, a disk image file, or a running host: "
            "ssh://[USER@]HOST[:PORT].",
            show_default=True,
        ),
    ] = "/",
    formats: Annotated[
        list[str] | None,
        typer.Option(
            "--format",
            "-f",
            help="FORMAT or FORMAT:PATH, FORMAT one of: text (a table), json (schema: imagelint schema "
            "units); repeatable, as for audit. Default: text to stdout.",
        ),
    ] = None,
    partition: PartitionOpt = None,
    region: RegionOpt = None,
    concurrency: ConcurrencyOpt = 16,
    sudo: SudoOpt = False,
    allow_partial_root: AllowPartialRootOpt = False,
) -> None:
    """List every systemd unit of an image: state, preset, unit file, drop-ins, and the boot chain.

    States and presets are those of `systemctl --root=ROOT list-unit-files`; for each unit started at
    boot, the chain that pulls it in (default.target → multi-user.target → ecs.service). Examples:

      imagelint units /mnt/image

      imagelint units /mnt/image --format json > units.json

      imagelint units disk.qcow2 -f text -f json:units.json

      imagelint units ebs:snap-0123456789abcdef0 --region eu-west-1

      imagelint units ssh://root@10.0.0.7
    """
    from imagelint.commands.units import run_units
    from imagelint.openers import OpenOptions

    ssh_only(root, sudo)
    opening = OpenOptions(
        partition=partition,
        region=region,
        concurrency=concurrency,
        sudo=sudo,
        partial_root=allow_partial_root,
    )
    raise typer.Exit(run_units(root, formats or ["text"], opening))


@command(
    app,
    meanings={ExitCode.INCONCLUSIVE: "inconclusive: cut short, or data on the host could not be read"},
    short="Watch this host for memory-cgroup growth and loops.",
)
@friendly
@with_run_options
def soak(
    host: Annotated[
        str | None,
        typer.Argument(
            metavar="[ssh://[USER@]HOST[:PORT]]",
            help="Soak this running host over SSH (its collector samples, the judgement runs here) "
            "instead of the host imagelint runs on.",
        ),
    ] = None,
    duration: Annotated[
        str, typer.Option("--duration", "-d", help="How long to watch: 90s, 10m, 1h.")
    ] = "10m",
    interval: Annotated[str, typer.Option("--interval", "-i", help="Time between samples.")] = "5s",
    from_bundle: Annotated[
        Path | None,
        typer.Option(
            "--from-bundle",
            dir_okay=False,
            readable=False,  # the opener says what it cannot read: one line, exit 3
            help="Judge the cgroup samples recorded in this bundle (from the remote collector) instead of "
            "watching this host; --duration and --interval are the bundle's.",
        ),
    ] = None,
    sudo: SudoOpt = False,
    hosts: HostsOpt = None,
    parallel: ParallelOpt = 8,
    *,
    run: RunOptions,
) -> None:
    """Watch this running host for a while and judge memory-cgroup growth and restart loops.

    Samples live and dying memory cgroups (cgroup v1, v2 or hybrid) every interval, reads every
    service's restart counter at the start and end, and times a read of every memory cgroup's
    memory.stat. Then runs the soak-scope rules (IL4xx): growth by a robust slope with a
    significance test, ceilings on the count and the dying:live ratio, units that restarted.
    Ctrl-C or SIGTERM ends early and still writes the report (a cut-short soak cannot pass).
    Run it as root on the host itself (not in a container). Examples:

      imagelint soak --duration 10m --interval 5s

      imagelint soak -d 5m -f text -f json:soak.json --fail-on high

      imagelint soak ssh://admin@node-7.lab --sudo -d 10m

      imagelint soak --hosts lab-hosts.txt -d 10m -f json:soak.json
    """
    from imagelint.durations import parse_duration
    from imagelint.soak.command import run_soak_command

    options = run
    if sum(x is not None for x in (host, from_bundle, hosts)) > 1:
        raise UsageError("give one of a host, --hosts FILE and --from-bundle")
    if hosts is None:
        ssh_only(host or "", sudo)
    if from_bundle is not None:
        from imagelint.session import prepare, publish, soak_bundle

        raise typer.Exit(int(publish(soak_bundle(prepare(options), str(from_bundle)), options).exit_code))
    seconds, every = parse_duration(duration, "--duration"), parse_duration(interval, "--interval")
    if hosts is not None:
        from imagelint.commands.hosts import run_hosts

        verdict = run_hosts(
            hosts, options, sudo=sudo, parallel=parallel, soak_seconds=seconds, soak_interval=every
        )
        raise typer.Exit(int(verdict.exit_code))
    if host is not None:
        from imagelint.collector.ssh.spec import parse
        from imagelint.openers import OpenOptions
        from imagelint.session import collecting, prepare, publish, soak_bundle

        parse(host)  # a bad spec is refused before the rules are loaded
        prepared = prepare(options)
        opening = collecting(prepared, OpenOptions(sudo=sudo), soak_seconds=seconds, soak_interval=every)
        raise typer.Exit(int(publish(soak_bundle(prepared, host, opening), options).exit_code))
    verdict = run_soak_command(seconds, every, options, interactive=sys.stderr.isatty())
    raise typer.Exit(int(verdict.exit_code))


@command(app, "completion", codes=USAGE_ONLY, meanings=SUCCESS, short="Print the shell completion script.")
@friendly
def completion(
    shell: Annotated[str, typer.Argument(help="bash, zsh, fish or powershell.", metavar="SHELL")],
) -> None:
    """Print the completion script of SHELL, for a file the shell reads at start-up.

    `imagelint --install-completion` installs it for the shell it runs in; this prints it for any
    shell, e.g. for a system-wide file. Examples:

      imagelint completion bash > /etc/bash_completion.d/imagelint

      imagelint completion zsh > "${fpath[1]}/_imagelint"
    """
    from typer._completion_shared import get_completion_script

    if shell not in COMPLETION_SHELLS:
        raise UsageError(f"no completion for {shell!r}: use one of {', '.join(COMPLETION_SHELLS)}")
    typer.echo(get_completion_script(prog_name="imagelint", complete_var="_IMAGELINT_COMPLETE", shell=shell))


@command(
    app,
    "collector",
    codes=USAGE_ONLY,
    meanings=SUCCESS,
    short="Write the POSIX-shell collector for hosts without Python.",
)
@friendly
def collector(
    directory: Annotated[
        Path, typer.Argument(help="Write collect.sh and plan.txt here (created if missing).")
    ],
    config: ConfigOpt = None,
    rules: RulesOpt = None,
    no_builtin_rules: NoBuiltinOpt = False,
) -> None:
    """Write the POSIX-shell collector and its plan, for a machine that has no imagelint (no Python).

    The plan lists what the loaded rules read (give the same --config and --rules as the audit). On the
    machine, `sh DIR/collect.sh DIR` (as root; POSIX sh, coreutils, tar) collects it into a bundle and
    prints the bundle's path; bring the bundle back and judge it here. Example:

      imagelint collector gate/ --config imagelint.yaml

      sudo sh /var/tmp/gate/collect.sh /var/tmp/gate      # on the machine

      imagelint audit bundle.tar.gz --config imagelint.yaml -f json:report.json
    """
    from imagelint.collector.files import write_collector
    from imagelint.collector.plan import instance_plan
    from imagelint.session import RunOptions, prepare

    prepared = prepare(
        RunOptions(config_path=config, extra_rules=list(rules or []), builtin=not no_builtin_rules)
    )
    plan = instance_plan(*prepared.rules, soak_seconds=0, soak_interval=5)
    for path in write_collector(directory, plan):
        typer.echo(str(path))


@command(rules_app, "list", codes=USAGE_ONLY, meanings=SUCCESS, short="List every loaded rule.")
@friendly
def rules_list(
    config: ConfigOpt = None,
    rules: RulesOpt = None,
    no_builtin_rules: NoBuiltinOpt = False,
    output: Annotated[
        str,
        typer.Option("--format", "-f", metavar="FORMAT", help="text (a table, the default) or json."),
    ] = "text",
    as_json: Annotated[bool, typer.Option("--json", hidden=True, help="The same as -f json.")] = False,
) -> None:
    """List every loaded rule, ordered by id: id, severity, scope, name and title.

    Example: imagelint rules list --rules my-pack.yaml -f json
    """
    if output not in {"text", "json"}:
        raise UsageError(f"-f {output}: rules list writes text or json")
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
    entries.sort(key=lambda e: _id_key(str(e["id"])))
    if as_json or output == "json":
        typer.echo(json.dumps(entries, indent=2))
        return
    rows = [("ID", "SEVERITY", "SCOPE", "NAME", "TITLE")]
    rows += [
        (str(e["id"]), str(e["severity"]), ",".join(e["scope"]), str(e["name"]), str(e["title"]))
        for e in entries
    ]
    for row in rows:
        typer.echo(_rule_row(row, [max(len(r[i]) for r in rows) for i in range(4)]))


def _id_key(rule_id: str) -> tuple[str, int, str]:
    """IL2 before IL10: the letters, then the number, then the whole id (a tie-break)."""
    import re

    match = re.fullmatch(r"(\D*)(\d+)(.*)", rule_id)
    if match is None:
        return rule_id, -1, rule_id
    return match.group(1), int(match.group(2)), rule_id


def _rule_row(row: tuple[str, ...], widths: list[int]) -> str:
    """One row of ``rules list``: every column as wide as its widest cell, the title last."""
    return " ".join(
        [*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]]
    ).rstrip()


@command(rules_app, "show", codes=USAGE_ONLY, meanings=SUCCESS, short="Show one rule in full.")
@friendly
def rules_show(
    rule_id: Annotated[str, typer.Argument(help="Rule id or name, e.g. IL101.")],
    config: ConfigOpt = None,
    rules: RulesOpt = None,
    no_builtin_rules: NoBuiltinOpt = False,
) -> None:
    """Show one rule in full: rationale, check, message, remediation, references.

    Example: imagelint rules show IL101
    """
    from imagelint.docs import render_rule
    from imagelint.session import load_rules

    packs, _ = load_rules(config, rules or [], builtin=not no_builtin_rules)
    for rule in (r for p in packs for r in p.rules):
        if rule.named_by(rule_id):
            typer.echo(render_rule(rule))
            return
    raise UsageError(f"no rule {rule_id!r} is loaded (see `imagelint rules list`)")


@command(
    rules_app,
    "validate",
    codes=USAGE_ONLY,
    meanings={ExitCode.PASS: "valid", ExitCode.USAGE: "invalid (file:line:column) or bad usage"},
    short="Validate rule packs without running them.",
)
@friendly
def rules_validate(
    files: Annotated[list[Path], typer.Argument(help="Rule pack files or directories.")],
) -> None:
    """Validate rule packs without running them; errors name file:line:column.

    Example: imagelint rules validate rules/my-pack.yaml
    """
    from imagelint.rulepacks import builtin_pack_paths, load_packs

    # Loading with the built-ins catches ids that collide with them (a built-in pack given here
    # is validated as itself, not as its own duplicate).
    given = {p.resolve() for f in files for p in ([*f.glob("*.y*ml")] if f.is_dir() else [f])}
    packs = load_packs(files, builtin=[p for p in builtin_pack_paths() if p.resolve() not in given])
    mine = [p for p in packs if not p.builtin]
    typer.echo(f"{sum(len(p.rules) for p in mine)} rule(s) in {len(mine)} pack(s): valid")


@command(
    schema_app, "rules", codes=(ExitCode.PASS,), meanings=SUCCESS, short="The JSON Schema of a rule pack."
)
def schema_rules() -> None:
    """Print the JSON Schema of a rule pack (composed from every check kind's parameters)."""
    from imagelint.rulepacks.schema import rules_schema

    typer.echo(json.dumps(rules_schema(), indent=2))


@command(schema_app, "config", codes=(ExitCode.PASS,), meanings=SUCCESS)
def schema_config() -> None:
    """Print the JSON Schema of the configuration file (.imagelint.yaml)."""
    from imagelint.config import config_schema

    typer.echo(json.dumps(config_schema(), indent=2))


@command(schema_app, "units", codes=(ExitCode.PASS,), meanings=SUCCESS)
def schema_units() -> None:
    """Print the JSON Schema of `imagelint units --format json`."""
    from imagelint.formats.units_json import UNITS_SCHEMA

    typer.echo(json.dumps(UNITS_SCHEMA, indent=2))


@command(schema_app, "report", codes=(ExitCode.PASS,), meanings=SUCCESS)
def schema_report() -> None:
    """Print the JSON Schema of the JSON report (--format json)."""
    from imagelint.report.schema import report_schema

    typer.echo(json.dumps(report_schema(), indent=2))


@command(
    docs_app,
    "rules",
    codes=DOCS_CODES,
    meanings=DOCS_MEANINGS,
    short="Generate the rule reference (docs/rules.md).",
)
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
    outputfile.replace(output, text.encode("utf-8"))


# The modules that register the other commands on ``app`` (in this order), by the first word of the
# command lines that need them: a line that names a command of this module imports none of them.
COMMAND_MODULES = {
    "ami": "aws",
    "fleet": "aws",
    "diff": "diff",
    "schema": "diff",  # `schema diff`
    "fix": "fix",
    "vm": "vm",
    "watch": "watch",
}


def load_commands(argv: list[str] | None = None) -> typer.Typer:
    """``app`` with the commands ``argv`` may run registered: every command when ``argv`` is None or
    names none of this module's (the root's help, an unknown command and the suggestions for it)."""
    word = None if argv is None else next((arg for arg in argv if not arg.startswith("-")), None)
    if word in COMMAND_MODULES:
        names = [COMMAND_MODULES[word]]
    elif word is not None and for_command_line([word]) is not app:
        names = []
    else:
        names = list(dict.fromkeys(COMMAND_MODULES.values()))
    for name in names:
        importlib.import_module(f"imagelint.cli.{name}")
    return app


def run() -> None:
    """Run the command line; a usage error is one line (no box drawing) and exit 2."""
    import typer.core

    # click as the installed typer raises its exceptions: typer 0.28 vendors it as typer._click
    click = getattr(typer.core, "_click", None) or importlib.import_module("click")
    argv = sys.argv[1:]
    quiet_on_closed_pipe()
    try:
        clear_stale(argv)  # before anything can fail: no report an earlier run left is read as this run's
    except ImageLintError as exc:  # a -f path this run would refuse to write (a link, a FIFO, ...)
        stderr.error(str(exc))
        sys.exit(int(exc.exit_code))
    load_commands(argv)
    command = typer.main.get_command(for_command_line(argv))
    try:
        code = command.main(args=argv, prog_name="imagelint", standalone_mode=False)
    except click.exceptions.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # its message is the help: to stdout, as -h
            sys.stdout.write(exc.format_message() + "\n")
        else:
            stderr.error(usage_line(exc))
        sys.exit(int(ExitCode.USAGE))
    except click.exceptions.ClickException as exc:
        stderr.error(exc.format_message())
        sys.exit(exc.exit_code)
    except typer.Abort:
        stderr.error("interrupted; inconclusive")
        sys.exit(int(ExitCode.INCONCLUSIVE))
    sys.exit(code if isinstance(code, int) else 0)


def usage_line(exc: Any) -> str:
    """A usage error in one line: what is wrong, and where the help is."""
    context = exc.ctx
    where = context.command_path if context is not None else "imagelint"
    return f"{exc.format_message()} (see '{where} -h')"
