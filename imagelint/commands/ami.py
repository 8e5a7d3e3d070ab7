"""`imagelint ami`: check an AMI before it ships, and record the verdict on it.

Before anything launches or is created, every AMI is described: one that is not available, not
EBS-backed, or not a Linux image (a Windows or macOS AMI: ``DescribeImages``' ``Platform``,
``PlatformDetails``, ``Architecture``) ends the run with exit 2 and one line. Then the credentials
must last the run (``--role-arn`` gives refreshing
ones, :mod:`imagelint.aws.credentials`), the pre-flight checks (:func:`preflight`) pass, the keys
of the volumes the run creates are usable (``--volume-kms-key``, or the region's EBS
encryption-by-default key: :mod:`imagelint.aws.volume_keys`), the launch subnet can reach SSM and S3
(:mod:`imagelint.aws.network`), and a ``DryRun`` of the launch request is allowed by the policies,
SCPs and tag policies (:func:`imagelint.aws.ec2.dry_run_launch`), all before anything is created.
``--resource-tag`` tags go on everything the run creates, ``--permissions-boundary`` on
``--create-profile``'s role.
Launch mode (default), per AMI: describe and check the image → launch one throwaway instance
(IMDSv2 required, terminates on shutdown, tagged ``imagelint:run=<run id>`` with its volumes, in the
run's own HTTPS-egress-only security group unless ``--security-group`` is given:
:mod:`imagelint.aws.run_group`; moved to the next subnet or instance type when EC2 has no
capacity: :mod:`imagelint.aws.capacity`) →
wait until running and Online in SSM → send the POSIX-shell collector (:mod:`imagelint.aws.ssm`,
:mod:`imagelint.collector`): it gathers what the loaded rules read, ``systemctl show`` and the soak's
samples into a bundle and uploads it to a presigned URL → download the bundle (deleted from the
bucket once read unless ``--keep-bundles``; a refused delete is a warning) and analyse it here,
with the local config and packs (:mod:`imagelint.bundle`) → terminate. Volume mode: create a volume from the
root snapshot in this runner's zone, attach, mount read-only, audit offline, unmount, detach, delete.
Snapshot mode (the offline mode to use; volume mode stays for accounts that forbid the EBS direct
APIs): read every EBS snapshot of the AMI in place through the EBS direct APIs, mounted as the root's
fstab says (:mod:`imagelint.aws.machine`), from anywhere, with no instance, volume, root or mount.

Several AMIs (and regions) are checked ``--parallel`` at a time (default 4; :func:`each_image`), each
in a worker thread with its progress lines labelled ``region:ami``; the combined report lists them in
the order given, whatever order they finish in. An image whose check cannot complete (an API error,
an unreadable snapshot: exit-3 errors) gets an inconclusive part of its own and the others go on;
:func:`imagelint.report.verdict.decide` then decides the combined verdict (a failing image fails the
run, else the missing one makes it inconclusive). Ctrl-C stops every worker where it is and each
cleans up what it launched (:meth:`imagelint.aws.signals.SignalGuard.worker`).

Then, on the combined report (:mod:`imagelint.report.merge`): keep the report in S3
(``--report-bucket``), tag the AMI and its snapshots (``--tag``), write the outputs, and only then act
on a failure (``--on-fail``; a failing call there ends the run with exit 3, the outputs already
written). Whatever happens (a finding, SSM never online, a failed command, an API error,
Ctrl-C, SIGTERM), the ``finally`` blocks terminate the instance, delete the volume and then the
run's security group, and a last sweep by the run tag catches anything a lost reply would have hidden.
Each of those is a step of its own (:mod:`imagelint.aws.teardown`): it runs whatever became of the
others and rides out throttling; a failed step is reported apart from the verdict (the report's
``facts.cleanup`` and a ``cleanup`` warning, one line on stderr), and turns a pass into exit 3.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import re
import tempfile
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import field
from datetime import UTC, datetime
from pathlib import Path

from imagelint import __version__
from imagelint.aws import capacity, run_group, run_profile
from imagelint.aws import ec2 as ec2_ops
from imagelint.aws import ssm as ssm_ops
from imagelint.aws.boot import BootWatch
from imagelint.aws.clients import Clients, default_region
from imagelint.aws.errors import AwsError, call, paginate
from imagelint.aws.policy import Namespace
from imagelint.aws.progress import Progress
from imagelint.aws.s3urls import run_expiry
from imagelint.aws.signals import Interrupted, SignalGuard
from imagelint.aws.snapshot import SnapshotSettings
from imagelint.aws.teardown import Teardown, leftovers_line
from imagelint.aws.volume import Ec2VolumeHost, VolumeHost, device_slot
from imagelint.collector.plan import instance_plan
from imagelint.errors import ExitCode, ImageLintError, UsageError
from imagelint.records import dataclass
from imagelint.report import Report, ReportError, Verdict
from imagelint.report.escape import json_text
from imagelint.report.merge import empty_report, merge
from imagelint.report.verdict import decide, with_leftovers
from imagelint.session import PreparedRun, RunOptions, audit_opened, bundle_reports, prepare, publish


@dataclass(frozen=True)
class Timing:
    """Polling intervals and deadlines (seconds); short in tests."""

    poll: float = 5.0
    running_timeout: float = 600.0
    ssm_timeout: float = 600.0
    command_margin: float = 900.0  # on top of the soak: collection and upload
    # SendCommand's TimeoutSeconds: how long SSM may hold the command before it starts (30 at least);
    # the wait for its result covers this window and then the command's own run
    delivery: float = 300.0
    boot_grace: float = 180.0  # after the console shows a finished boot, wait this long for the agent
    boot_check_every: float = 30.0  # how often the SSM wait looks at the instance's state and console
    group_wait: float = 300.0  # DependencyViolation retries when deleting the run's security group


DEFAULT_PARALLEL = 4
MAX_PARALLEL = 32


@dataclass
class AmiOptions:
    images: list[str] = field(default_factory=list)  # "ami-…" or "region:ami-…"
    packer_manifest: Path | None = None
    region: str | None = None
    mode: str = "launch"
    report_bucket: str | None = None
    report_prefix: str = "imagelint/"
    launch: ec2_ops.LaunchSettings = field(default_factory=ec2_ops.LaunchSettings)
    soak_seconds: float = 0.0
    soak_interval: float = 5.0
    version: str = __version__
    tag: bool = False
    on_fail: str = "none"
    timing: Timing = field(default_factory=Timing)
    run: RunOptions = field(default_factory=RunOptions)
    interactive: bool = False
    role_arn: str | None = None  # assume this role (refreshing credentials) for the whole run
    snapshot: SnapshotSettings = field(default_factory=SnapshotSettings)
    parallel: int = DEFAULT_PARALLEL  # images checked at once (``--parallel``)
    create_profile: bool = False  # --create-profile: a role and profile for each run
    network_check: bool = True  # --skip-network-check: a refused path is a warning
    permissions_boundary: str | None = None  # --permissions-boundary: of --create-profile's role
    document: tuple[str, str | None] = (ssm_ops.DOCUMENT, None)  # --document NAME[:VERSION]
    keep_bundles: bool = False  # --keep-bundles: leave the instance's bundle in the bucket once read
    namespace: Namespace = field(default_factory=Namespace)  # --profile-namespace /PATH/PREFIX

    def per_image_seconds(self) -> float:
        """How long one image's launch may take: start, SSM, the soak and the command's margin."""
        t = self.timing
        return t.running_timeout + t.ssm_timeout + t.delivery + self.soak_seconds + t.command_margin

    def run_seconds(self, images: int) -> float:
        """How long the whole run may take: the images in waves of ``parallel``, then the cleanup."""
        waves = -(-images // max(1, min(self.parallel, images or 1)))
        return waves * self.per_image_seconds() + 600


MODES = ("launch", "snapshot", "volume")


@dataclass(frozen=True)
class Checked:
    region: str
    ami: str
    image: ec2_ops.ImageInfo | None  # None: the image could not be checked (the report says why)
    report: Report
    run_id: str

    @property
    def label(self) -> str:
        return f"{self.region}:{self.ami}"


# --- the command -------------------------------------------------------------------------------


def resolve_images(options: AmiOptions) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    if options.packer_manifest:
        from imagelint.aws.manifest import amis_from_manifest

        pairs += amis_from_manifest(options.packer_manifest)
    for given in options.images:
        region, sep, ami = given.rpartition(":")
        pairs.append((region if sep else default_region(options.region), ami))
    if not pairs:
        raise UsageError("give an AMI id or --packer-manifest FILE")
    if options.region:
        pairs = [(r or options.region, a) for r, a in pairs]
    return pairs


def run_ami(
    options: AmiOptions, *, volume_host: VolumeHost | None = None, clients: dict[str, Clients] | None = None
) -> Verdict:
    if options.mode not in MODES:
        raise UsageError(f"--mode {options.mode!r}: use {', '.join(MODES)}")
    if options.on_fail not in ("none", "deregister", "deprecate"):
        raise UsageError(f"--on-fail {options.on_fail!r}: use deregister, deprecate or none")
    if options.mode == "launch" and not options.report_bucket:
        raise UsageError("launch mode needs --report-bucket: the instance writes its reports there")
    if options.mode == "launch" and not options.launch.instance_profile and not options.create_profile:
        raise UsageError(
            "launch mode needs --instance-profile (or --create-profile): without a role the "
            "instance's SSM agent never registers; `imagelint ami check --help` has the role's policies"
        )
    if options.launch.instance_profile and options.create_profile:
        raise UsageError("give --instance-profile or --create-profile, not both")
    capacity.preferences(options.launch)  # a type or subnet given twice, or too many: before any call
    check_hardening(options)
    prepared = prepare(options.run)  # once, and bad -f/--fail-on/--select refused before any launch
    pairs = resolve_images(options)
    clients = clients if clients is not None else {}
    # every image's run id, known before the session: the first names the AWS session (--role-arn)
    run_ids = {pair: str(uuid.uuid4()) for pair in pairs}
    session = _session(options, pairs, clients, label=run_ids[pairs[0]] if pairs else None)
    if not 1 <= options.parallel <= MAX_PARALLEL:
        raise UsageError(f"--parallel {options.parallel}: give 1 to {MAX_PARALLEL}")
    for region, _ami in pairs:
        clients.setdefault(region, Clients(region, session))
    described = _describe_all(clients, pairs)  # a Windows or macOS AMI is refused before anything runs
    if options.on_fail != "none":
        _check_owned(clients, described.values(), options.on_fail)
    guard = SignalGuard()
    failures: list[str] = []  # cleanup steps that failed, every image's (reported apart from the verdict)
    with guard.installed(), Progress(interactive=options.interactive) as progress:

        def check(pair: tuple[str, str], shown: Progress) -> Checked:
            region, ami = pair
            teardown = Teardown(shown.log, first=min(1.0, options.timing.poll), failures=failures)
            try:
                return _check_one(
                    clients[region],
                    described.get(pair),
                    (region, ami),
                    options,
                    prepared,
                    guard,
                    shown,
                    volume_host,
                    teardown,
                    run_ids[pair],
                )
            except ImageLintError as exc:
                if (
                    len(pairs) == 1
                    or exc.exit_code is not ExitCode.INCONCLUSIVE
                    or isinstance(exc, Interrupted)
                ):
                    raise
                shown.log(f"error (the other images go on): {exc}")
                target = {"kind": "ami", "path": f"{region}:{ami}", "image_id": ami, "region": region}
                return Checked(
                    region, ami, None, empty_report({**target, "mode": options.mode}, str(exc)), ""
                )

        checked = each_image(pairs, check, options.parallel, guard, progress)
        report = (
            checked[0].report
            if len(checked) == 1
            else merge(
                [(c.label, c.report) for c in checked],
                {"kind": "ami", "path": ",".join(c.label for c in checked)},
            )
        )
        report.verdict = decide(report)
        if failures:  # the audit's verdict stands; the cleanup's failure is its own entry
            report.facts["cleanup"] = {"failed": list(failures)}
            report.warnings.append(ReportError(leftovers_line(failures), where="cleanup"))
        body = json_text(report.to_dict(), indent=2, sort_keys=True).encode()
        digest = hashlib.sha256(body).hexdigest()
        for c in checked:
            if c.image is not None:
                _store(clients[c.region], c, options, body, progress)
        published = publish(report, options.run)
        # tags after the outputs: a refused CreateTags is a warning and never changes the exit code
        for c in checked:
            if options.tag and c.image is not None:
                _tag(clients[c.region], c, digest, progress)
        # after the outputs are written: a failing --on-fail call (exit 3) does not lose the report
        for c in checked:
            if c.image is not None and c.report.verdict is Verdict.FAIL and options.on_fail != "none":
                progress.log(ec2_ops.act_on_failure(clients[c.region].ec2, c.image, options.on_fail))
        if failures:
            progress.log(f"error: {leftovers_line(failures)}")
    return with_leftovers(published, bool(failures))


BOUNDARY_ARN = re.compile(r"^arn:aws[a-z-]*:iam::(\d{12}|aws):policy/[\w+=,.@/-]{1,512}$")


def check_hardening(options: AmiOptions) -> None:
    """The options of hardened accounts, refused (exit 2) where they would do nothing."""
    boundary = options.permissions_boundary
    if boundary is not None:
        if not options.create_profile or options.mode != "launch":
            raise UsageError(
                "--permissions-boundary is the boundary of the role --create-profile makes: give "
                "--create-profile (launch mode) with it"
            )
        if not BOUNDARY_ARN.match(boundary):
            raise UsageError(
                f"--permissions-boundary {boundary!r}: give a managed policy's ARN "
                "(arn:aws:iam::ACCOUNT:policy/NAME)"
            )
    if options.launch.kms_key is not None and options.mode == "snapshot":
        raise UsageError(
            "--volume-kms-key: snapshot mode creates no volume; use it with launch or volume mode"
        )


def each_image(
    pairs: list[tuple[str, str]],
    check: Callable[[tuple[str, str], Progress], Checked],
    parallel: int,
    guard: SignalGuard,
    progress: Progress,
) -> list[Checked]:
    """``check`` on every (region, AMI), ``parallel`` at a time, the results in the order given
    whatever the order they finish in. One at a time, in this thread; several, each in a worker
    thread registered with the guard (a Ctrl-C stops each where it is and lets it clean up), with
    its progress lines labelled. The first error that ends the run is raised once every image
    started has finished its cleanup; images not started yet are not started."""
    if parallel == 1 or len(pairs) == 1:
        return [check(pair, progress) for pair in pairs]

    def work(pair: tuple[str, str]) -> Checked:
        with guard.worker():
            return check(pair, progress.labelled(f"{pair[0]}:{pair[1]}"))

    pool = ThreadPoolExecutor(max_workers=min(parallel, len(pairs)), thread_name_prefix="imagelint-ami")
    try:
        futures = [pool.submit(work, pair) for pair in pairs]
        return [future.result() for future in futures]
    finally:
        with guard.cleanup():  # a signal now is noted: the workers clean up, this thread waits for them
            pool.shutdown(wait=True, cancel_futures=True)


def _describe_all(
    clients: dict[str, Clients], pairs: list[tuple[str, str]]
) -> dict[tuple[str, str], ec2_ops.ImageInfo]:
    """Every AMI described and checked (:func:`imagelint.aws.ec2.describe_image`: available, EBS-backed,
    a Linux image) before any of them is checked: a refusal (exit 2) comes before any request that
    creates or costs anything. An AMI whose description fails (an API error) is left to its own check."""
    described: dict[tuple[str, str], ec2_ops.ImageInfo] = {}
    for region, ami in pairs:
        try:
            described[(region, ami)] = ec2_ops.describe_image(clients[region].ec2, ami, region)
        except AwsError:
            continue
    return described


def _check_owned(clients: dict[str, Clients], images: Iterable[ec2_ops.ImageInfo], on_fail: str) -> None:
    """--on-fail deregisters or deprecates the AMI, which only its owner may do: a shared AMI of
    another account is refused before anything runs, not after its check."""
    from imagelint.aws.kms import caller_account

    account = ""
    for image in images:
        account = account or caller_account(clients[image.region])
        if image.owner and image.owner != account:
            raise UsageError(
                f"--on-fail {on_fail}: {image.image_id} is owned by account {image.owner}, not this one "
                f"({account}); only its owner can {on_fail} it: drop --on-fail or run in that account"
            )


def _check_one(
    clients: Clients,
    described: ec2_ops.ImageInfo | None,
    pair: tuple[str, str],
    options: AmiOptions,
    prepared: PreparedRun,
    guard: SignalGuard,
    progress: Progress,
    volume_host: VolumeHost | None,
    teardown: Teardown,
    run_id: str,
) -> Checked:
    region, ami = pair
    progress.phase("checking image", f"{region}:{ami}")
    image = described or ec2_ops.describe_image(clients.ec2, ami, region)
    target = {
        "kind": "ami",
        "path": f"{region}:{ami}",
        "image_id": ami,
        "region": region,
        "name": image.name,
        "mode": options.mode,
        "run_id": run_id,
    }
    check = _ImageCheck(clients, image, options, prepared, run_id, guard, progress, teardown)
    if options.mode == "volume":
        report = _volume(check, volume_host or Ec2VolumeHost())
    elif options.mode == "snapshot":
        report = _snapshot(clients, image, options, prepared, progress)
    else:
        report = _launch(check)
    report.target = {**target, **{k: v for k, v in report.target.items() if k == "instance_id"}}
    progress.log(f"{region}:{ami}: {report.verdict.value}")
    return Checked(region, ami, image, report, run_id)


@dataclass(frozen=True)
class _ImageCheck:
    """What checking one image by a boot (:func:`_launch`) or a volume (:func:`_volume`) works with."""

    clients: Clients
    image: ec2_ops.ImageInfo
    options: AmiOptions
    prepared: PreparedRun
    run_id: str
    guard: SignalGuard
    progress: Progress
    teardown: Teardown


def _launch(check: _ImageCheck) -> Report:
    from imagelint.aws.kms import caller_account

    clients, image, options, prepared = check.clients, check.image, check.options, check.prepared
    run_id, guard, progress, teardown = check.run_id, check.guard, check.progress, check.teardown
    timing = options.timing
    assert options.report_bucket
    expires = run_expiry(per_wave=options.per_image_seconds())
    plan = ssm_ops.RemotePlan(
        run_id=run_id,
        bucket=options.report_bucket,
        prefix=options.report_prefix,
        bucket_region=image.region,
        version=options.version,
        collector_plan=instance_plan(
            *prepared.rules, soak_seconds=options.soak_seconds, soak_interval=options.soak_interval
        ).text(),
        # instance_id and upload_url: once the instance has an id
        soak_seconds=options.soak_seconds,
        soak_interval=options.soak_interval,
        document=options.document[0],
        document_version=options.document[1],
        bucket_owner=caller_account(clients),  # ExpectedBucketOwner on every request on the bucket
    )
    types, subnets = preflight(clients, image, options, plan)
    kms_key = volume_key(clients, image, options, progress)
    bucket_region = clients.presigner(options.report_bucket).region  # launch mode has a bucket
    where = capacity.plan(
        clients.ec2,
        types,
        subnets,
        image.region,
        bucket_region=bucket_region,
        groups=options.launch.security_groups,
        refuse=options.network_check,
        log=progress.log,
    )
    judged = where.judged
    launch = dataclasses.replace(
        options.launch, kms_key=kms_key, deadline=ec2_ops.deadline_after(options.per_image_seconds())
    )
    group_id: str | None = None
    instance_id: str | None = None
    command_id: str | None = None
    finished = False
    try:
        # inside the try: an endpoint that launched anyway is cleaned up by the run tag
        progress.phase("dry run", f"RunInstances of {image.image_id} (policies, SCPs, tag policies)")
        for candidate in where.candidates:  # an SCP may allow some types or subnets only
            ec2_ops.dry_run_launch(
                clients.ec2, image, candidate.applied(launch), run_id, deadline=options.per_image_seconds()
            )
        if options.create_profile:
            progress.phase("creating instance profile", options.namespace.name(run_id))
            profile = run_profile.create_run_profile(
                clients.get("iam"),
                run_id,
                tags=launch.tags,
                boundary=options.permissions_boundary,
                deadline=launch.deadline,
                namespace=options.namespace,
            )
            launch = dataclasses.replace(launch, instance_profile=profile)
        if not launch.security_groups:
            progress.phase("creating security group", f"in {where.vpc_id}: HTTPS egress only")
            group_id = run_group.create_run_group(
                clients.ec2,
                where.vpc_id,
                run_id,
                launch.tags,
                deadline=launch.deadline,
                dns_servers=judged.dns.custom,
            )
            launch = dataclasses.replace(launch, security_groups=(group_id,))
        first = where.candidates[0]
        progress.phase("launching", f"{image.image_id} as {first.label}, run {run_id}")

        def launch_at(candidate: capacity.Candidate) -> str:
            settings = candidate.applied(launch)
            return run_profile.launch_retrying(
                lambda: ec2_ops.launch_instance(
                    clients.ec2, image, settings, run_id, deadline=options.per_image_seconds()
                ),
                poll=timing.poll,
                tries=run_profile.PROFILE_TRIES if options.create_profile else 1,
            )

        instance_id, attempts = capacity.launch_across(where.candidates, launch_at, progress.log)
        progress.log(f"launched {instance_id} (run {run_id})")
        ec2_ops.wait_running(clients.ec2, instance_id, poll=timing.poll, timeout=timing.running_timeout)
        progress.phase("waiting for SSM", instance_id)
        try:
            watch = BootWatch(
                clients.ec2, instance_id, grace=timing.boot_grace, every=timing.boot_check_every
            )
            ssm_ops.wait_online(
                clients.ssm, instance_id, timeout=timing.ssm_timeout, poll=timing.poll, doomed=watch.doomed
            )
        except ssm_ops.NoReportError as exc:
            console = ec2_ops.console_output(clients.ec2, instance_id)
            raise ssm_ops.NoReportError(
                f"{exc}; console output: {console}" if console else f"{exc}; no console output yet"
            ) from None
        plan = bound_plan(clients, plan, instance_id, expires)
        progress.phase("auditing" if not plan.soak_seconds else "auditing and soaking", instance_id)
        delivery = max(ssm_ops.MIN_DELIVERY_TIMEOUT, math.ceil(timing.delivery))
        command_id = ssm_ops.send(clients.unretried("ssm"), plan, delivery_timeout=delivery)
        started = datetime.now(UTC)

        def show(status: str) -> None:
            guard.checkpoint()
            if plan.soak_seconds:
                left = plan.soak_seconds - (datetime.now(UTC) - started).total_seconds()
                progress.update(f"{status}, soak {max(0, left):.0f}s left")
            else:
                progress.update(status)

        invocation = ssm_ops.wait_invocation(
            clients.ssm,
            command_id,
            instance_id,
            timeout=delivery + plan.soak_seconds + timing.command_margin,
            poll=timing.poll,
            on_poll=show,
        )
        finished = True
        progress.phase("collecting", f"s3://{plan.bucket}/{plan.key(instance_id, ssm_ops.BUNDLE)}")
        with tempfile.TemporaryDirectory(prefix="imagelint-run-") as scratch:
            bundle = ssm_ops.fetch_bundle(clients.s3, plan, instance_id, invocation, Path(scratch))
            left = None if options.keep_bundles else ssm_ops.discard_bundle(clients.s3, plan, instance_id)
            if left:
                progress.log(f"warning: {left}")
            progress.phase("analysing", f"{bundle.stat().st_size:,} bytes from {instance_id}")
            labelled = bundle_reports(prepared, bundle)
        report = merge(labelled, {"kind": "ami", "path": image.image_id})
        report.target["instance_id"] = instance_id
        report.facts["network"] = judged.fact()
        report.facts["launch"] = {"attempts": [a.to_dict() for a in attempts]}
        if left:
            report.warnings.append(ReportError(left, where="bundle"))
        return report
    finally:
        with guard.cleanup():
            progress.phase("cleaning up", instance_id or "")
            if command_id and not finished:
                ssm_ops.cancel(clients.ssm, command_id, [instance_id] if instance_id else None)
            _clean_run(teardown, clients, run_id, instance_id, group_id, options, progress)


def _clean_run(
    teardown: Teardown,
    clients: Clients,
    run_id: str,
    instance_id: str | None,
    group_id: str | None,
    options: AmiOptions,
    progress: Progress,
) -> None:
    """Each step in isolation (:class:`Teardown`): terminate the run's instances (the one we know and
    any the run tag finds: a lost reply), wait for them, delete the run's volumes that outlived them
    (attached from elsewhere, or mapped without DeleteOnTermination by a launch that lost its reply),
    the security group, and the role and instance profile of --create-profile."""
    poll = options.timing.poll
    ids = {instance_id} if instance_id else set()
    run_filter = {"Name": f"tag:{ec2_ops.RUN_TAG}", "Values": [run_id]}
    alive = {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}

    def listed() -> None:
        pages = paginate(clients.ec2, "describe_instances", "Reservations", Filters=[run_filter, alive])
        ids.update(i["InstanceId"] for i in ec2_ops.instances_of(pages))

    def terminated() -> None:
        ec2_ops.terminate_instances(clients.ec2, sorted(ids), wait=False, poll=poll)
        progress.log(f"terminated {', '.join(sorted(ids))}")

    teardown.step("list the run's instances", listed)
    if ids and teardown.step(f"terminate {', '.join(sorted(ids))}", terminated):
        teardown.step(
            "wait for the termination", lambda: ec2_ops.wait_terminated(clients.ec2, sorted(ids), poll=poll)
        )
    volumes: list[dict[str, str]] = []
    teardown.step(
        "list the run's volumes",
        lambda: volumes.extend(paginate(clients.ec2, "describe_volumes", "Volumes", Filters=[run_filter])),
    )
    for volume in volumes:
        if volume["State"] in ("available", "error"):
            teardown.step(
                f"delete {volume['VolumeId']}",
                functools.partial(_remove_volume, clients, volume["VolumeId"], poll, progress),
            )
    teardown.step(
        "delete the run's security group",
        lambda: run_group.sweep_run_groups(
            clients.ec2,
            run_id,
            [group_id] if group_id else [],
            poll=poll,
            log=progress.log,
            wait=options.timing.group_wait,
        ),
    )
    if options.create_profile:
        name = options.namespace.name(run_id)
        teardown.step(
            f"remove role and instance profile {name}", lambda: _remove_profile(clients, name, progress)
        )


def _remove_volume(
    clients: Clients, volume_id: str, poll: float, progress: Progress, *, force: bool = False
) -> None:
    ec2_ops.remove_volume(clients.ec2, volume_id, poll=poll, force=force)
    progress.log(f"deleted {volume_id}")


def _remove_profile(clients: Clients, name: str, progress: Progress) -> None:
    for removed in run_profile.remove_run_profile(clients.get("iam"), name):
        progress.log(f"deleted {removed}")


def _volume(check: _ImageCheck, host: VolumeHost) -> Report:
    from imagelint.aws import kms
    from imagelint.openers import open_spec

    clients, image, options, prepared = check.clients, check.image, check.options, check.prepared
    run_id, guard, progress, teardown = check.run_id, check.guard, check.progress, check.teardown
    root_snapshot = _root_snapshot(image)
    kms.check_image(clients, image.image_id, [root_snapshot], kms.LAUNCH, mappings=image.mappings)
    settings = dataclasses.replace(
        options.launch,
        kms_key=volume_key(clients, image, options, progress),
        deadline=ec2_ops.deadline_after(options.per_image_seconds()),
    )
    instance_id, zone = host.identity()
    ec2_ops.check_zone(clients.ec2, zone, image)
    volume_id: str | None = None
    try:
        progress.phase("creating volume", f"from {root_snapshot} in {zone}")
        volume_id = ec2_ops.create_volume(clients.ec2, root_snapshot, zone, run_id, settings)
        progress.phase("attaching", f"{volume_id} to {instance_id}")
        with device_slot(clients.ec2, instance_id) as name:
            ec2_ops.attach_volume(clients.ec2, volume_id, instance_id, name, poll=options.timing.poll)
        device = host.find_device(volume_id, timeout=options.timing.running_timeout, device=name)
        progress.phase("auditing", f"{device} read-only")
        with host.mounted(device) as root, open_spec(str(root)) as opened:
            report = audit_opened(prepared, opened)
        report.facts["volume"] = {"volume_id": volume_id, "snapshot_id": root_snapshot, "zone": zone}
        return report
    finally:
        with guard.cleanup():
            progress.phase("cleaning up", volume_id or "")
            if volume_id:
                removed = volume_id
                teardown.step(
                    f"delete {removed}",
                    lambda: _remove_volume(clients, removed, options.timing.poll, progress, force=True),
                )


def _snapshot(
    clients: Clients, image: ec2_ops.ImageInfo, options: AmiOptions, prepared: PreparedRun, progress: Progress
) -> Report:
    """Read every EBS snapshot of the AMI in place, mounted by the root's fstab as boot would
    (:mod:`imagelint.aws.machine`): nothing is created, so nothing needs cleaning up."""
    from imagelint.aws import kms
    from imagelint.openers.snapshot import open_ami_disks

    kms.check_owned(clients, image.image_id, _root_snapshot(image), image.region)
    kms.check_image(clients, image.image_id, list(image.snapshots), kms.READ, mappings=image.mappings)
    with open_ami_disks(clients, image.mappings, image.root_device, options.snapshot, progress) as opened:
        return audit_opened(prepared, opened)


def _root_snapshot(image: ec2_ops.ImageInfo) -> str:
    if not image.root_snapshot:
        raise UsageError(f"{image.image_id}: its root device {image.root_device} has no EBS snapshot")
    return image.root_snapshot


def bound_plan(
    clients: Clients, plan: ssm_ops.RemotePlan, instance_id: str, expires: int
) -> ssm_ops.RemotePlan:
    """``plan`` for one instance: a fresh binding token for it, and the presigned PUT URL of its bundle
    (SigV4, in the bucket's region) that S3 accepts only with that token as the object's metadata."""
    binding = ssm_ops.new_binding()
    url = clients.presigner(plan.bucket, plan.bucket_owner).put_url(
        plan.key(instance_id, ssm_ops.BUNDLE),
        max(1, expires),
        {ssm_ops.BINDING_META: binding},
        ssm_ops.upload_params(plan),
    )
    return dataclasses.replace(plan, instance_id=instance_id, upload_url=str(url), binding=binding)


def _store(clients: Clients, checked: Checked, options: AmiOptions, body: bytes, progress: Progress) -> None:
    """Keep the combined report in S3 (``--report-bucket``)."""
    if options.report_bucket:
        key = f"{options.report_prefix}{checked.run_id}/report.json"
        call(
            clients.s3.put_object,
            Bucket=options.report_bucket,
            Key=key,
            Body=body,
            ContentType="application/json",
        )
        digest = hashlib.sha256(body).hexdigest()
        progress.log(f"report: s3://{options.report_bucket}/{key} (sha256 {digest[:12]}…)")


def _tag(clients: Clients, checked: Checked, digest: str, progress: Progress) -> None:
    """Tag the verdict on the AMI and its snapshots; any failure (the 50-tag limit, snapshots of a
    shared AMI this account cannot see, a denied CreateTags) is a warning: the verdict stands."""
    assert checked.image is not None
    tags = verdict_tags(checked.report.verdict, digest)
    try:
        ec2_ops.tag_image(clients.ec2, checked.image, tags)
    except (AwsError, UsageError) as exc:
        progress.log(
            f"warning: could not tag {checked.image.image_id} (the verdict and exit code stand): {exc}"
        )
        return
    progress.log(
        f"tagged {checked.image.image_id} and {len(checked.image.snapshots)} snapshot(s): "
        f"imagelint:verdict={tags['imagelint:verdict']}"
    )


def _session(
    options: AmiOptions, pairs: list[tuple[str, str]], clients: dict[str, Clients], *, label: str | None
) -> object:
    """The boto3 session of the run, checked to last it: ``--role-arn``'s refreshing one (named after
    ``label``, a run id), or the environment's (refused when it expires before the run can end).
    Tests pass ``clients``."""
    from imagelint.aws import credentials

    needed = options.run_seconds(len(pairs))
    if clients:
        return next(iter(clients.values())).session
    session = credentials.run_session(options.role_arn, needed, pairs[0][0], label=label)
    if options.mode == "launch":
        credentials.check_lifetime(session, needed, role=bool(options.role_arn))
    return session


def preflight(
    clients: Clients, image: ec2_ops.ImageInfo, options: AmiOptions, plan: ssm_ops.RemotePlan
) -> tuple[list[str], list[str | None]]:
    """The launch-mode checks (:mod:`imagelint.aws.preflight`); returns the instance types to launch
    and the subnets (None: a default one), each in order of preference."""
    from imagelint.aws import kms
    from imagelint.aws import preflight as checks

    assert options.report_bucket
    checks.check_execution_timeout(plan.execution_timeout)
    checks.check_bucket(
        clients.s3,
        options.report_bucket,
        f"{options.report_prefix}{plan.run_id}/run.json",
        {"run_id": plan.run_id, "image_id": image.image_id, "region": image.region, "version": __version__},
    )
    if options.launch.instance_profile:
        checks.check_instance_profile(clients.get("iam"), options.launch.instance_profile)
    types, subnets = capacity.preferences(options.launch)
    for subnet in subnets:
        checks.check_subnet(clients.ec2, subnet)
    kms.check_image(clients, image.image_id, image.snapshots, kms.LAUNCH, mappings=image.mappings)
    given = [dataclasses.replace(options.launch, instance_type=t) for t in types]
    return [ec2_ops.instance_type_for(clients.ec2, image, settings) for settings in given], subnets


def volume_key(
    clients: Clients, image: ec2_ops.ImageInfo, options: AmiOptions, progress: Progress
) -> str | None:
    """The key the run's volumes are encrypted with (:mod:`imagelint.aws.volume_keys`): the ARN of
    ``--volume-kms-key``, checked; without it the region's encryption-by-default key is checked (when
    the setting is on) and the volumes are left to it (None)."""
    from imagelint.aws import volume_keys

    if options.launch.kms_key:
        return volume_keys.check_volume_key(clients, options.launch.kms_key, progress.log)
    volume_keys.check_default_key(clients, image.region, progress.log)
    return None


def verdict_tags(verdict: Verdict, digest: str) -> dict[str, str]:
    return {
        "imagelint:verdict": verdict.value,
        "imagelint:report-sha256": digest,
        "imagelint:version": __version__,
        "imagelint:checked-at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
