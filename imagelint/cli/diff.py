"""``imagelint diff OLD NEW`` and ``imagelint schema diff``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from imagelint.cli.application import app, friendly, schema_app
from imagelint.cli.helptext import SUCCESS, command
from imagelint.cli.options import (
    AllowPartialRootOpt,
    ConcurrencyOpt,
    ConfigOpt,
    NoBuiltinOpt,
    RegionOpt,
    RulesOpt,
)
from imagelint.errors import ExitCode

DIFF_MEANINGS = {
    ExitCode.PASS: "no change the config's diff: section fails (warnings may be listed)",
    ExitCode.FAIL: "NEW brings in a change the config fails (default: a new boot unit, a new failing "
    "finding)",
    ExitCode.USAGE: "bad usage or config (the message names file:line:column)",
    ExitCode.INCONCLUSIVE: "inconclusive: a side could not be read (in full): no such image or report, "
    "not a report, an image without the marks of an operating system's root, an audit that could not "
    "read its data",
}


@command(app, "diff", meanings=DIFF_MEANINGS, short="What changed at boot between two images or reports.")
@friendly
def diff(
    old: Annotated[
        Path,
        typer.Argument(
            help="The previous image (anything audit takes), its JSON report, or an AMI.", readable=False
        ),
    ],
    new: Annotated[
        Path,
        typer.Argument(
            help="The new image (anything audit takes), its JSON report, or an AMI.", readable=False
        ),
    ],
    config: ConfigOpt = None,
    rules: RulesOpt = None,
    no_builtin_rules: NoBuiltinOpt = False,
    region: RegionOpt = None,
    concurrency: ConcurrencyOpt = 16,
    allow_partial_root: AllowPartialRootOpt = False,
    formats: Annotated[
        list[str] | None,
        typer.Option(
            "--format",
            "-f",
            help="FORMAT or FORMAT:PATH, FORMAT one of: text, json (schema: imagelint schema diff), "
            "markdown (a PR comment, $GITHUB_STEP_SUMMARY); repeatable. Default: text to stdout.",
        ),
    ] = None,
) -> None:
    """What changed from OLD to NEW that matters at boot: units newly started at boot or no longer
    (with the chain that starts them), enablement and preset changes, restart policies (a start
    limit that can no longer trip), executables that appeared or vanished, drop-ins, the default
    target, packages, os-release and kernel command line, and findings new or resolved.

    OLD and NEW are images in any form audit takes (a root directory, a disk image file, ebs:snap-…,
    a collector bundle; audited now with the same rules and config) or JSON reports of `imagelint
    audit -f json:…` (their inventory and findings). Which kinds of change fail or warn
    is the config's diff: section (`imagelint schema config`); by default a new boot unit and a
    new failing finding fail, everything else warns.

    Two EBS snapshots of one lineage: NEW is read through ListChangedBlocks (only its changed blocks
    fetched, the rest reused from OLD's); other pairs are read in full, with a warning saying why.
    A snapshot's audit is kept in $XDG_CACHE_HOME/imagelint/audits and the blocks its read needed in
    $XDG_CACHE_HOME/imagelint/blocks (IMAGELINT_NO_CACHE=1: both off), so the next diff against it
    reads neither it nor NEW's unchanged blocks again.

    Two AMIs (ami-… or region:ami-…): every EBS volume, matched by device name, each pair diffed as
    two snapshots (non-root volumes as filesystems of their own); a device only one AMI maps is a
    "volumes" change. Examples:

      imagelint diff /mnt/last-release /mnt/candidate

      imagelint diff last-release.json /mnt/candidate -f text -f markdown:diff.md

      imagelint diff old.json new.json -f json:diff.json -c .imagelint.yaml

      imagelint diff /mnt/last-release candidate.qcow2

      imagelint diff ebs:snap-0aaaaaaaaaaaaaaaa ebs:snap-0bbbbbbbbbbbbbbbb

      imagelint diff ami-0aaaaaaaaaaaaaaa ami-0bbbbbbbbbbbbbbb --region eu-west-1
    """
    from imagelint.commands.diff import run_diff
    from imagelint.formats import RenderOptions
    from imagelint.formats.interface import DIFF
    from imagelint.formats.outputs import OutputSpec, write_outputs
    from imagelint.openers import OpenOptions

    outputs = OutputSpec.parse_all(formats or ["text"], DIFF)
    opening = OpenOptions(region=region, concurrency=concurrency, partial_root=allow_partial_root)
    result = run_diff(old, new, config, rules or [], builtin=not no_builtin_rules, opening=opening)
    write_outputs(result, outputs, RenderOptions(), DIFF)
    raise typer.Exit(int(result.verdict.exit_code))


@command(schema_app, "diff", codes=(ExitCode.PASS,), meanings=SUCCESS)
def schema_diff() -> None:
    """Print the JSON Schema of `imagelint diff --format json`."""
    from imagelint.diff.schema import diff_schema

    typer.echo(json.dumps(diff_schema(), indent=2))
