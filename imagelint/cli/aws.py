"""The AWS commands: `imagelint ami` (check, the default, and cleanup) and `imagelint fleet`.

`imagelint ami AMI…` stays short for `imagelint ami check AMI…`: the group starts `check` when
its first argument names no subcommand, so Packer templates and CI scripts keep working.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer import _click as click  # typer < 0.29 vendors click
from typer.core import TyperGroup

from imagelint.cli.application import MARKUP, app, friendly
from imagelint.cli.helptext import SUCCESS, command, command_help, expand
from imagelint.cli.options import (
    ConcurrencyOpt,
    DocumentOpt,
    KeepBundlesOpt,
    PollOpt,
    ProfileNamespaceOpt,
    RegionOpt,
    ReportPrefixOpt,
    RoleArnOpt,
    SoakIntervalOpt,
    with_run_options,
)
from imagelint.errors import ExitCode

if TYPE_CHECKING:
    from imagelint.session import RunOptions

AWS_INCONCLUSIVE = (
    "inconclusive: the instance never reported, or an AWS call failed; also a passing image whose "
    "cleanup failed (something may be left: the report keeps the pass)"
)
CLEANUP_MEANINGS = {
    ExitCode.PASS: "removed what was found (--dry-run: listed it)",
    ExitCode.INCONCLUSIVE: "inconclusive: an AWS call failed; the other removals still ran (what was "
    "removed is listed)",
}


class CheckByDefault(TyperGroup):
    """A group whose first argument, when it names no subcommand (an AMI id, an option), starts
    ``check``: ``imagelint ami ami-0abc…`` is ``imagelint ami check ami-0abc…``."""

    default_command = "check"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [self.default_command, *args]
        parsed: list[str] = super().parse_args(ctx, args)
        return parsed

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.help = expand(self.help or "")
        super().format_help(ctx, formatter)


AMI_GROUP_DOC = """Check AMIs before they ship, and remove what killed runs left behind.

    `imagelint ami check` (the default: `imagelint ami AMI…` is `imagelint ami check AMI…`) boots,
    audits and soaks an AMI, or reads its snapshots in place; `imagelint ami check --help` has the
    modes and options. `imagelint ami policies` prints the IAM policies as JSON to paste.
    `imagelint ami cleanup` removes the instances and volumes of runs that were killed outright.
    Examples:

      imagelint ami ami-0abc… --report-bucket my-bucket \\
          --instance-profile imagelint-ssm --tag

      imagelint ami policies runner > runner-policy.json

      imagelint ami cleanup --dry-run
    """
ami_app = typer.Typer(
    cls=CheckByDefault,
    short_help="Check AMIs before they ship; clean up after killed runs.",
    help=command_help(AMI_GROUP_DOC, meanings={ExitCode.INCONCLUSIVE: AWS_INCONCLUSIVE}),
    no_args_is_help=True,
    rich_markup_mode=MARKUP,
)
app.add_typer(ami_app, name="ami")


@command(
    ami_app,
    "check",
    meanings={ExitCode.INCONCLUSIVE: AWS_INCONCLUSIVE},
    short="Boot, audit and soak an AMI, or read its snapshots.",
)
@friendly
@with_run_options
def ami_check(
    images: Annotated[list[str] | None, typer.Argument(help="AMI ids (ami-… or REGION:ami-…).")] = None,
    packer_manifest: Annotated[
        Path | None,
        typer.Option(
            "--packer-manifest", help="Check the AMIs of this Packer run (manifest post-processor file)."
        ),
    ] = None,
    region: RegionOpt = None,
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            help="launch: boot an instance, audit --live and soak over SSM; "
            "snapshot: read the AMI's snapshots in place through the EBS direct APIs and audit offline, "
            "from anywhere; volume: mount the root snapshot on this EC2 runner and audit offline.",
        ),
    ] = "launch",
    concurrency: ConcurrencyOpt = 16,
    parallel: Annotated[
        int,
        typer.Option(
            "--parallel",
            min=1,
            max=32,
            help="AMIs (and regions) checked at once; one combined report, in the order given.",
        ),
    ] = 4,
    report_bucket: Annotated[
        str | None,
        typer.Option("--report-bucket", help="S3 bucket for the instance's reports and the final report."),
    ] = None,
    report_prefix: ReportPrefixOpt = "imagelint/",
    instance_types: Annotated[
        list[str] | None,
        typer.Option(
            "--instance-type",
            help="Default: t3.medium for x86_64 AMIs, t4g.medium for arm64. Repeatable, in order of "
            "preference: tried in turn when EC2 has no capacity.",
        ),
    ] = None,
    subnets: Annotated[
        list[str] | None,
        typer.Option(
            "--subnet",
            help="Subnet id (default: the default VPC's). Repeatable (one VPC), in order of preference: "
            "on a capacity error the launch moves to the next subnet's zone, then to the next type.",
        ),
    ] = None,
    security_groups: Annotated[
        list[str] | None,
        typer.Option(
            "--security-group",
            help="Repeatable; its egress is judged before launch. Default: a group made for the run "
            "(HTTPS egress only, and DNS to the VPC's own DNS servers; no ingress), deleted after it.",
        ),
    ] = None,
    instance_profile: Annotated[
        str | None,
        typer.Option(
            "--instance-profile",
            help="Name or ARN; launch mode needs it (or --create-profile). Its role needs "
            "AmazonSSMManagedInstanceCore "
            "and s3:PutObject on the report bucket.",
        ),
    ] = None,
    create_instance_profile: Annotated[
        bool,
        typer.Option(
            "--create-profile",
            help="Instead of --instance-profile: create a role and instance profile for the run "
            "(those policies; path /imagelint/) and delete them after it.",
        ),
    ] = False,
    resource_tags: Annotated[
        list[str] | None,
        typer.Option(
            "--resource-tag",
            metavar="KEY=VALUE",
            help="Repeatable. A tag on every resource the run creates (instance, volumes, network "
            "interface, security group, --create-profile's role and profile), in the creating call, "
            "as an SCP may require; the imagelint:run tag stays.",
        ),
    ] = None,
    volume_kms_key: Annotated[
        str | None,
        typer.Option(
            "--volume-kms-key",
            help="KMS key (id, ARN, alias/NAME or alias ARN) every volume the run creates is encrypted "
            "with; checked (enabled, symmetric) before anything is created.",
        ),
    ] = None,
    permissions_boundary: Annotated[
        str | None,
        typer.Option(
            "--permissions-boundary",
            help="With --create-profile: the ARN of the managed policy set as the role's permissions "
            "boundary.",
        ),
    ] = None,
    document: DocumentOpt = None,
    keep_bundles: KeepBundlesOpt = False,
    profile_namespace: ProfileNamespaceOpt = None,
    skip_network_check: Annotated[
        bool,
        typer.Option(
            "--skip-network-check",
            help="A subnet that seems to have no path to SSM and S3 is a warning, not a refusal (for "
            "paths the check cannot see: shared endpoints behind a transit gateway).",
        ),
    ] = False,
    soak: Annotated[
        str, typer.Option("--soak", help="Soak length on the instance (0 = no soak): 90s, 10m.")
    ] = "10m",
    soak_interval: SoakIntervalOpt = "5s",
    tag: Annotated[bool, typer.Option("--tag", help="Tag the verdict on the AMI and its snapshots.")] = False,
    on_fail: Annotated[
        str, typer.Option("--on-fail", help="deregister|deprecate|none, on a fail verdict.")
    ] = "none",
    poll: PollOpt = "5s",
    ssm_timeout: Annotated[str, typer.Option("--ssm-timeout", help="How long to wait for SSM.")] = "10m",
    role_arn: RoleArnOpt = None,
    *,
    run: RunOptions,
) -> None:
    """Check an AMI before it ships: boot it, audit and soak it over SSM, tag the verdict.

    Examples (`imagelint ami AMI…` is short for `imagelint ami check AMI…`):

      imagelint ami ami-0abc… --report-bucket my-bucket \\
          --instance-profile imagelint-ssm --tag

      imagelint ami --packer-manifest packer-manifest.json \\
          --report-bucket my-bucket --soak 5m --tag

      imagelint ami ami-0abc… --mode snapshot --tag -f json:report.json

    The IAM policies each mode needs: `imagelint ami policies` (JSON; `imagelint ami policies
    runner`, `instance-trust` or `snapshot-mode` prints one document to paste).

    Launch mode (the default) needs --report-bucket: the instance writes its reports there, with
    the config and rule packs shipped the same way; and --instance-profile, whose role lets the
    SSM agent register (or --create-profile, which needs the ImagelintRunProfile statement).
    Unless --security-group is given, each run creates a security group imagelint-<run id> in the
    subnet's VPC (no ingress, egress tcp/443 only) and deletes it after the instance; the VPC's
    default group is never used. Before launch, the subnet must reach SSM and S3: a default route
    to a NAT or internet gateway (with public IPs), or VPC endpoints for ssm, ssmmessages,
    ec2messages and s3. --on-fail deregister also deletes the AMI's snapshots (unless another
    image uses them).

    Snapshot mode is the offline mode: it creates nothing and needs no EC2 runner, only the
    snapshot-mode policy (its KMS actions for encrypted snapshots; narrow their Resource to the
    keys). It reads only snapshots this account owns: copy a public or shared AMI first (aws ec2
    copy-image). Volume mode (mount the root snapshot on this EC2 runner) stays for accounts that
    forbid the EBS direct APIs.

    Every instance, volume and security group is tagged imagelint:run=<uuid> and removed in every
    outcome (`imagelint ami cleanup` removes what a killed run left).

    Hardened accounts: --resource-tag KEY=VALUE puts the tags an SCP requires on every resource the
    run creates; --volume-kms-key encrypts its volumes with a chosen key; --permissions-boundary
    bounds --create-profile's role. Before anything is created, a DryRun of the very RunInstances
    request asks AWS whether the policies, SCPs and tag policies allow it, and the region's EBS
    encryption-by-default key is checked (a disabled or deleted one would fail every launch).
    """
    from imagelint.aws.ec2 import LaunchSettings, parse_resource_tags
    from imagelint.aws.policy import Namespace
    from imagelint.aws.snapshot import SnapshotSettings
    from imagelint.aws.ssm import parse_document
    from imagelint.commands.ami import AmiOptions, Timing, run_ami
    from imagelint.durations import parse_duration

    options = AmiOptions(
        images=images or [],
        packer_manifest=packer_manifest,
        region=region,
        mode=mode,
        report_bucket=report_bucket,
        report_prefix=report_prefix,
        launch=LaunchSettings(
            instance_types[0] if instance_types else None,
            subnets[0] if subnets else None,
            tuple(security_groups or ()),
            instance_profile,
            tags=parse_resource_tags(resource_tags or []),
            kms_key=volume_kms_key,
            more_types=tuple((instance_types or [])[1:]),
            more_subnets=tuple((subnets or [])[1:]),
        ),
        soak_seconds=parse_duration(soak, "--soak", allow_zero=True),
        soak_interval=parse_duration(soak_interval, "--soak-interval"),
        tag=tag,
        on_fail=on_fail,
        timing=Timing(
            poll=parse_duration(poll, "--poll"), ssm_timeout=parse_duration(ssm_timeout, "--ssm-timeout")
        ),
        run=run,
        interactive=sys.stderr.isatty(),
        role_arn=role_arn,
        snapshot=SnapshotSettings(concurrency=concurrency),
        parallel=parallel,
        create_profile=create_instance_profile,
        network_check=not skip_network_check,
        permissions_boundary=permissions_boundary,
        document=parse_document(document),
        keep_bundles=keep_bundles,
        namespace=Namespace.parse(profile_namespace) if profile_namespace else Namespace(),
    )
    raise typer.Exit(int(run_ami(options).exit_code))


@command(
    ami_app,
    "policies",
    codes=(ExitCode.PASS, ExitCode.USAGE),
    meanings=SUCCESS,
    short="Print the IAM policies imagelint ami needs, as JSON.",
)
@friendly
def ami_policies(
    name: Annotated[
        str | None,
        typer.Argument(
            help="Print only this document: runner, instance-trust, instance-role-managed-policy or "
            "snapshot-mode."
        ),
    ] = None,
    region: Annotated[
        str | None,
        typer.Option("--region", help="Write them for this region's partition (aws-cn, aws-us-gov...)."),
    ] = None,
    report_bucket: Annotated[
        str | None, typer.Option("--report-bucket", help="Fill in REPORT-BUCKET: the run's --report-bucket.")
    ] = None,
    report_prefix: Annotated[
        str | None, typer.Option("--report-prefix", help="The run's --report-prefix (default imagelint/).")
    ] = None,
    account: Annotated[
        str | None, typer.Option("--account", help="Fill in ACCOUNT-ID: the account owning the gated AMIs.")
    ] = None,
    candidate_tag: Annotated[
        str | None,
        typer.Option(
            "--candidate-tag",
            help="Fill in CANDIDATE-TAG-KEY=VALUE: the tag your pipeline puts on candidate AMIs and their "
            "snapshots (--tag and --on-fail act only on those).",
        ),
    ] = None,
    fleet_tag: Annotated[
        str | None,
        typer.Option(
            "--fleet-tag",
            help="Fill in FLEET-TAG-KEY=VALUE[,VALUE]: the tag of `fleet --target tag:KEY=VALUE`.",
        ),
    ] = None,
    role_arn: Annotated[
        str | None, typer.Option("--role-arn", help="Fill in RUN-ROLE-ARN: the role --role-arn assumes.")
    ] = None,
    instance_role: Annotated[
        str | None,
        typer.Option("--instance-role", help="Fill in INSTANCE-ROLE: the instance profile's role name."),
    ] = None,
    permissions_boundary: Annotated[
        str | None,
        typer.Option(
            "--permissions-boundary",
            help="The --permissions-boundary policy ARN --create-profile runs give their roles (default "
            "AmazonSSMManagedInstanceCore): the runner may create and attach only with it.",
        ),
    ] = None,
    document: Annotated[
        str | None,
        typer.Option("--document", help="The runs' --document NAME[:VERSION]: SendCommand only with it."),
    ] = None,
    profile_namespace: ProfileNamespaceOpt = None,
    sse_kms_key: Annotated[
        str | None,
        typer.Option("--sse-kms-key", help="Fill in REPORT-KMS-KEY: the ARN of fleet's --sse-kms-key."),
    ] = None,
) -> None:
    """Print the IAM policies `imagelint ami` needs, as JSON, generated from the code.

    runner: the identity running `imagelint ami check` in launch mode. The placeholders (INSTANCE-ROLE,
    REPORT-BUCKET, ACCOUNT-ID, CANDIDATE-TAG-KEY/VALUE, FLEET-TAG-KEY/VALUE, RUN-ROLE-ARN,
    REPORT-KMS-KEY) are filled in by the options of the same names; one not given stays a
    placeholder. instance-trust: the trust policy of the instance profile's role, which needs the
    AWS managed policy named by instance-role-managed-policy and nothing else (the instance uploads
    its report through a presigned URL of its own key). snapshot-mode: the identity
    running --mode snapshot. ARNs and endpoint names are those of --region's partition (botocore's
    endpoint data): arn:aws-cn: and amazonaws.com.cn for cn-north-1. Examples:

      imagelint ami policies runner > runner-policy.json

      imagelint ami policies --region cn-north-1

      imagelint ami policies | jq '.["instance-trust"]'

      imagelint ami policies runner --report-bucket reports --account 123456789012

      imagelint ami policies runner --candidate-tag stage=rc --fleet-tag Role=web
    """
    import json

    from imagelint.aws.policy_fill import Fill, documents
    from imagelint.errors import UsageError

    values = Fill(
        report_bucket,
        report_prefix,
        account,
        candidate_tag,
        fleet_tag,
        role_arn,
        instance_role,
        permissions_boundary,
        document,
        profile_namespace,
        sse_kms_key,
    )
    docs = documents(region, values)
    if name is not None and name not in docs:
        raise UsageError(f"no policy named {name!r}: use one of {', '.join(docs)}")
    typer.echo(json.dumps(docs if name is None else docs[name], indent=2))


@command(
    ami_app,
    "cleanup",
    codes=(ExitCode.PASS, ExitCode.USAGE, ExitCode.INCONCLUSIVE),
    meanings=CLEANUP_MEANINGS,
    short="Remove what killed AMI runs left behind.",
)
@friendly
def ami_cleanup(
    region: RegionOpt = None,
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            help="An extra guard: only resources launched or created longer ago (the deadline tag "
            "already keeps runs in progress).",
        ),
    ] = "0s",
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            help="Remove this run's resources now, before their deadline (a run you know is dead: its "
            "runner was killed; the id is in its log and its imagelint:run tags).",
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List, do not remove.")] = False,
    poll: PollOpt = "5s",
    role_arn: RoleArnOpt = None,
    profile_namespace: ProfileNamespaceOpt = None,
) -> None:
    """Remove what earlier AMI runs left behind: instances, volumes and security groups tagged
    imagelint:run, and the roles and instance profiles of --create-profile runs.

    A run removes its own instances and volumes in every outcome it lives through; this sweeper
    covers a runner that was killed outright (SIGKILL, lost network, a CI timeout). Only what carries
    both a run's imagelint:run tag and its imagelint:deadline tag, past, is removed (a role or
    profile also named after that run): a run in progress, however long its soak, and a resource that
    only looks like a run's are left. Examples:

      imagelint ami cleanup --dry-run

      imagelint ami cleanup --region eu-west-1

      imagelint ami cleanup --run 3f2c…   # a killed run's, before its deadline
    """
    from imagelint import stderr
    from imagelint.aws.cleanup import run_cleanup
    from imagelint.aws.policy import Namespace
    from imagelint.aws.teardown import CleanupError, Teardown
    from imagelint.durations import parse_duration

    every = parse_duration(poll, "--poll")
    steps = Teardown(stderr.warning, first=min(1.0, every))
    for line in run_cleanup(
        region,
        parse_duration(older_than, "--older-than", allow_zero=True),
        dry_run=dry_run,
        poll=every,
        role_arn=role_arn,
        teardown=steps,
        run=run,
        namespace=Namespace.parse(profile_namespace) if profile_namespace else None,
    ):
        typer.echo(line)
    if steps.failures:
        raise CleanupError(steps.failures)


@command(
    app,
    meanings={
        ExitCode.PASS: "pass: every instance passed",
        ExitCode.FAIL: "fail: an instance failed",
        ExitCode.INCONCLUSIVE: "inconclusive: an instance never reported, or was not sent its command "
        "(and none failed)",
    },
    short="Audit running instances over SSM: a row per instance.",
)
@friendly
@with_run_options
def fleet(
    target: Annotated[str, typer.Option("--target", help="tag:KEY=VALUE[,VALUE…]: the instances to check.")],
    report_bucket: Annotated[str, typer.Option("--report-bucket", help="S3 bucket for the reports.")],
    report_prefix: ReportPrefixOpt = "imagelint/",
    region: RegionOpt = None,
    max_concurrency: Annotated[
        str,
        typer.Option(
            "--max-concurrency",
            help="Instances checked at once: a number, or a percentage of the managed ones.",
        ),
    ] = "10%",
    max_errors: Annotated[
        str,
        typer.Option(
            "--max-errors",
            help="Failed commands tolerated before no new one is sent: a number, or a percentage.",
        ),
    ] = "10%",
    allow_unmanaged: Annotated[
        bool,
        typer.Option(
            "--allow-unmanaged",
            help="Tagged instances that SSM does not manage, or manages as another platform than "
            "Linux, are listed as not covered without making the run inconclusive.",
        ),
    ] = False,
    soak: Annotated[str, typer.Option("--soak", help="Soak length on each instance (0 = none).")] = "0",
    soak_interval: SoakIntervalOpt = "5s",
    poll: PollOpt = "5s",
    role_arn: RoleArnOpt = None,
    credentials_expire_at: Annotated[
        str | None,
        typer.Option(
            "--credentials-expire-at",
            metavar="TIMESTAMP",
            envvar="AWS_CREDENTIAL_EXPIRATION",
            show_envvar=False,  # named in the text: typer's note would take three lines
            help="When the AWS credentials expire, as ISO 8601 with a zone (2026-12-03T21:40:00Z): for "
            "credentials whose expiry the SDK cannot see, such as a CI job's OIDC role in environment "
            "variables. The run is refused when it could outlast them; without this, a session token "
            "of unknown expiry counts as one hour. Default: $AWS_CREDENTIAL_EXPIRATION.",
        ),
    ] = None,
    keep_bundles: KeepBundlesOpt = False,
    document: DocumentOpt = None,
    bucket_owner: Annotated[
        str | None,
        typer.Option(
            "--bucket-owner",
            metavar="ACCOUNT",
            help="The 12-digit account that owns --report-bucket (every S3 request sends it as "
            "ExpectedBucketOwner; another account's bucket gets uploads with the ACL "
            "bucket-owner-full-control). Default: the caller's own account.",
        ),
    ] = None,
    sse_kms_key: Annotated[
        str | None,
        typer.Option(
            "--sse-kms-key",
            metavar="KEY",
            help="Upload the bundles with SSE-KMS under this KMS key (key ARN, key id or alias ARN): "
            "for a bucket whose policy refuses uploads without x-amz-server-side-encryption.",
        ),
    ] = None,
    *,
    run: RunOptions,
) -> None:
    """Audit running instances through SSM Run Command; one report with a row per tagged instance.

    Each instance SSM manages gets a command of its own, carrying its own upload URL only, at most
    --max-concurrency at a time; no new command is sent once more than --max-errors have failed.
    Tagged instances SSM does not manage, or manages as Windows or macOS hosts, are listed as not
    covered, and make the run inconclusive unless --allow-unmanaged. One host's trouble (a refused
    or throttled SendCommand, an agent lost mid-run, a refused download, a bundle that does not decode,
    a full scratch disk) is that host's row; the others are judged, and the report is written.
    The config and rule packs stay here: each instance uploads a bundle to the report bucket and is
    judged on this machine. Example:

      imagelint fleet --target tag:Role=gpu-node --report-bucket my-bucket \\
          --soak 5m -f json:fleet.json
    """
    from imagelint.aws.credentials import parse_expiry
    from imagelint.aws.ssm import parse_document
    from imagelint.commands.fleet import FleetOptions, run_fleet
    from imagelint.durations import parse_duration

    options = FleetOptions(
        target=target,
        region=region,
        report_bucket=report_bucket,
        report_prefix=report_prefix,
        max_concurrency=max_concurrency,
        max_errors=max_errors,
        soak_seconds=parse_duration(soak, "--soak", allow_zero=True),
        soak_interval=parse_duration(soak_interval, "--soak-interval"),
        poll=parse_duration(poll, "--poll"),
        run=run,
        interactive=sys.stderr.isatty(),
        role_arn=role_arn,
        allow_unmanaged=allow_unmanaged,
        credentials_expire_at=parse_expiry(credentials_expire_at),
        keep_bundles=keep_bundles,
        document=parse_document(document),
        bucket_owner=bucket_owner or "",
        sse_kms_key=sse_kms_key or "",
    )
    raise typer.Exit(int(run_fleet(options).exit_code))
