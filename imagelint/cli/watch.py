"""`imagelint watch`: the node mode (Prometheus endpoint, node_exporter textfile, node-problem-detector)."""

from __future__ import annotations

from typing import Annotated

import typer

from imagelint.cli.application import app, fail, friendly
from imagelint.cli.helptext import command
from imagelint.cli.options import ConfigOpt, NoBuiltinOpt, RulesOpt
from imagelint.errors import ExitCode

NPD_MEANINGS = {
    ExitCode.PASS: "OK (with --npd: the condition is not present)",
    ExitCode.FAIL: "with --npd only: the problem is present",
    ExitCode.USAGE: "bad usage, or with --npd: Unknown (the check could not be made)",
}


@command(
    app,
    codes=(ExitCode.PASS, ExitCode.FAIL, ExitCode.USAGE),
    meanings=NPD_MEANINGS,
    short="Keep measuring this host, for Prometheus or NPD.",
)
@friendly
def watch(
    listen: Annotated[
        str | None,
        typer.Option("--listen", metavar="ADDR:PORT", help="Serve Prometheus metrics at /metrics."),
    ] = None,
    textfile: Annotated[
        str | None,
        typer.Option(
            "--textfile",
            metavar="DIR",
            help="Write DIR/imagelint.prom for node_exporter's textfile collector.",
        ),
    ] = None,
    npd: Annotated[
        str | None,
        typer.Option(
            "--npd",
            metavar="CHECK",
            help="node-problem-detector plugin: run one check (dying-memcg-growth, unit-restart-loop, "
            "nic-resets), print one line, exit 0 OK / 1 problem / 2 unknown.",
        ),
    ] = None,
    npd_state: Annotated[
        str | None,
        typer.Option("--npd-state", metavar="FILE", help="Where --npd keeps samples between invocations."),
    ] = None,
    interval: Annotated[str, typer.Option("--interval", "-i", help="Memory-cgroup sample period.")] = "10s",
    window: Annotated[
        str, typer.Option("--window", help="How far back the trend and restart loops look.")
    ] = "1h",
    units_every: Annotated[str, typer.Option("--units-every", help="systemctl show period.")] = "30s",
    journal_every: Annotated[str, typer.Option("--journal-every", help="Journal poll period.")] = "10s",
    walk_every: Annotated[str, typer.Option("--walk-every", help="memory.stat walk period.")] = "60s",
    judge_every: Annotated[str, typer.Option("--judge-every", help="Soak rules period.")] = "5m",
    cpu_every: Annotated[str, typer.Option("--cpu-every", help="/proc/stat read period.")] = "1s",
    duration: Annotated[
        str | None, typer.Option("--duration", "-d", help="Stop after this long (default: until SIGTERM).")
    ] = None,
    journal_dir: Annotated[str, typer.Option("--journal-dir", help="Journal directory to follow.")] = (
        "/var/log/journal"
    ),
    journal_from_start: Annotated[
        bool, typer.Option("--journal-from-start", help="Count entries already in the journal at start too.")
    ] = False,
    proc_root: Annotated[str, typer.Option("--proc-root", help="Where the host's /proc is.")] = "/proc",
    cgroup_root: Annotated[str, typer.Option("--cgroup-root", help="Where the host's cgroups are.")] = (
        "/sys/fs/cgroup"
    ),
    max_units: Annotated[int, typer.Option("--max-units", help="Most units labelled in metrics.")] = 20,
    loop_restarts: Annotated[
        int, typer.Option("--loop-restarts", help="Restarts within the window that make a restart loop.")
    ] = 3,
    no_rules: Annotated[bool, typer.Option("--no-rules", help="Do not judge the soak rules.")] = False,
    config: ConfigOpt = None,
    rules: RulesOpt = None,
    no_builtin_rules: NoBuiltinOpt = False,
) -> None:
    """Keep measuring this host: memory cgroups, restart loops and kernel symptoms, for Prometheus or NPD.

    Samples live and dying memory cgroups every interval with the soak's sampler (the trend over the
    window: Theil-Sen slope and Mann-Kendall p-value), reads every service's state and restart counter
    with one systemctl show, follows the journal for ENA resets, Tx timeouts, soft lockups and OOM
    kills (each entry counted once, across rotations), times the memory.stat walk, and judges the soak
    rules over the window. A source the host lacks is reported (imagelint_source_up 0) and retried;
    the rest keeps working. Examples:

      imagelint watch --listen 0.0.0.0:9847

      imagelint watch --textfile /var/lib/prometheus/node-exporter

      imagelint watch --npd dying-memcg-growth \\
          --npd-state /var/lib/imagelint/npd.json
    """
    from imagelint.durations import parse_duration
    from imagelint.session import RunOptions

    seconds: dict[str, float] = {
        name: parse_duration(value, flag)
        for name, value, flag in (
            ("interval", interval, "--interval"),
            ("window", window, "--window"),
            ("units_every", units_every, "--units-every"),
            ("journal_every", journal_every, "--journal-every"),
            ("walk_every", walk_every, "--walk-every"),
            ("judge_every", judge_every, "--judge-every"),
            ("cpu_every", cpu_every, "--cpu-every"),
        )
    }
    if npd is not None:
        _npd(
            npd,
            npd_state,
            seconds["window"],
            journal_dir,
            proc_root,
            cgroup_root,
            loop_restarts,
            listen,
            textfile,
        )
        return
    from imagelint.watch.command import Outputs, run_watch
    from imagelint.watch.loop import WatchSettings

    settings = WatchSettings(
        interval=seconds["interval"],
        window=seconds["window"],
        units_every=seconds["units_every"],
        journal_every=seconds["journal_every"],
        walk_every=seconds["walk_every"],
        judge_every=seconds["judge_every"],
        cpu_every=seconds["cpu_every"],
        journal_dir=journal_dir,
        journal_from_start=journal_from_start,
        proc_root=proc_root,
        cgroup_root=cgroup_root,
        max_units=max_units,
        loop_restarts=loop_restarts,
    )
    options = (
        None
        if no_rules
        else RunOptions(config_path=config, extra_rules=rules or [], builtin=not no_builtin_rules)
    )
    outputs = Outputs(listen, textfile)
    run_watch(
        settings, outputs, options, duration=parse_duration(duration, "--duration") if duration else None
    )


def _npd(
    check: str,
    state: str | None,
    window: float,
    journal_dir: str,
    proc_root: str,
    cgroup_root: str,
    loop_restarts: int,
    listen: str | None,
    textfile: str | None,
) -> None:
    from imagelint.watch.npd import CHECKS, NpdSettings, one_line, run_check

    if listen is not None or textfile is not None:
        raise fail(
            "watch: --npd runs one check and exits; it cannot be combined with --listen/--textfile",
            ExitCode.USAGE,
        )
    if check not in CHECKS:
        raise fail(f"watch: --npd {check!r}: use one of {', '.join(CHECKS)}", ExitCode.USAGE)
    settings = NpdSettings(
        state_path=state,
        window=window,
        loop_restarts=loop_restarts,
        proc_root=proc_root,
        cgroup_root=cgroup_root,
        journal_dir=journal_dir,
    )
    status, message = run_check(check, settings)
    typer.echo(one_line(message))
    raise typer.Exit(int(status))
