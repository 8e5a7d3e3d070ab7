"""``imagelint fix``: remediation of an image's failing findings (registered by importing this module)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from imagelint.cli.application import app, friendly
from imagelint.cli.helptext import command
from imagelint.cli.options import (
    AllowPartialRootOpt,
    ConcurrencyOpt,
    ConfigOpt,
    FailOnOpt,
    IgnoreOpt,
    NoBuiltinOpt,
    PartitionOpt,
    RegionOpt,
    RulesOpt,
    SelectOpt,
    build_run_options,
)
from imagelint.errors import ExitCode

FIX_MEANINGS = {
    ExitCode.PASS: "the script or the list was printed; with --apply: applied, and the audit now passes",
    ExitCode.FAIL: "with --apply: applied, but findings at or above fail-on remain (listed on stderr)",
    ExitCode.USAGE: "bad usage, rule pack or config; --apply on anything but a directory",
    ExitCode.INCONCLUSIVE: "inconclusive: the image could not be read (in full) or lacks the marks of an "
    "operating system's root, or a path to change turned out to be a link",
}


@command(app, "fix", meanings=FIX_MEANINGS, short="Remediate failing findings: an sh script, or --apply.")
@friendly
def fix(
    root: Annotated[
        Path,
        typer.Argument(
            help="The image: anything audit takes (--apply: a root directory only).", readable=False
        ),
    ] = Path("/"),
    config: ConfigOpt = None,
    rules: RulesOpt = None,
    no_builtin_rules: NoBuiltinOpt = False,
    fail_on: FailOnOpt = None,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format", "-f", help="sh (a POSIX shell script, the default) or packer (an HCL provisioner)."
        ),
    ] = "sh",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the actions and the finding each clears; change nothing.")
    ] = False,
    apply: Annotated[
        bool,
        typer.Option("--apply", help="Perform the actions on ROOT (a directory) and audit it again."),
    ] = False,
    partition: PartitionOpt = None,
    region: RegionOpt = None,
    concurrency: ConcurrencyOpt = 16,
    allow_partial_root: AllowPartialRootOpt = False,
) -> None:
    """Remediate the image's failing findings with the fixes their rules declare.

    Audits ROOT as `imagelint audit` does (same config, --fail-on, --select/--ignore), then, for
    every failing finding (at or above fail-on: --fail-on low fixes the low ones too) whose rule
    declares a machine-applicable fix (a `fix:` list in its rule pack), prints a
    POSIX sh script to stdout. The script takes the image root as its first argument (default /):
    run it as a Packer shell provisioner inside the build, or on a mounted image. Units are
    disabled or masked with `systemctl --root`; files are removed, emptied, linked or chmod-ed
    below the root only (the script stops, exit 3, rather than go through a link). Findings that
    need a person (a key to rotate, a rule with no machine fix) are listed as comments and on
    stderr, with the reason.

    -f packer prints a `provisioner "shell"` block that runs the same script; --dry-run lists the
    actions with the findings each clears; --apply performs them on a directory ROOT (never a disk
    image, snapshot, bundle or live host: exit 2), resolving every path as a chroot would, then
    audits again: the exit code is that audit's verdict. Unit changes are exactly those of
    `systemctl --root=ROOT disable|mask`, so the script and --apply leave identical trees, and
    running either again changes nothing. Examples:

      imagelint fix /mnt/image > fix.sh && sh fix.sh /mnt/image

      imagelint fix /mnt/image --dry-run

      imagelint fix /mnt/image --apply --select IL501,IL102

      imagelint fix build.qcow2 -f packer > fix.pkr.hcl.part
    """
    from imagelint.commands.fix import FixMode, run_fix
    from imagelint.openers import OpenOptions

    options = build_run_options(
        config=config,
        rules=rules,
        no_builtin_rules=no_builtin_rules,
        fail_on=fail_on,
        select=select,
        ignore=ignore,
        github=False,
    )
    opening = OpenOptions(
        partition=partition,
        region=region,
        concurrency=concurrency,
        interactive=sys.stderr.isatty(),
        partial_root=allow_partial_root,
    )
    raise typer.Exit(run_fix(str(root), options, FixMode(fmt, dry_run, apply), opening))
