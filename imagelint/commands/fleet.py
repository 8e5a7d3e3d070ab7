"""`imagelint fleet`: audit (and soak) running instances through SSM Run Command, one combined report.

SSM does the fan-out (``Targets`` by tag, ``MaxConcurrency``, ``MaxErrors``); imagelint schedules
nothing. Each instance runs the same script as in ``imagelint ami`` (:mod:`imagelint.aws.ssm`) and
uploads its reports to ``s3://BUCKET/PREFIX<run id>/<instance id>/``. When the command is done, the
CLI lists its invocations, reads every instance's reports and prints one report: findings of all
instances (subjects prefixed with the instance id), ``facts.instances`` with a row per instance,
and one verdict, decided by :func:`imagelint.report.verdict.decide` on every instance's findings.
An instance that sent no usable report (its command failed, was cancelled at the deadline, or SSM
stopped it at ``MaxErrors``) gets a row with verdict ``inconclusive``, its
command status and the reason as an error; the fleet's verdict is then ``inconclusive`` (exit 3)
unless another instance fails (exit 1: a fail is never hidden by an unreadable part). Each
instance runs the collector and uploads a bundle; the runner analyses every bundle with the local
config and rule packs (:mod:`imagelint.bundle.run`). The tagged instances are listed before the
command is sent, each with its own presigned upload URL.
"""

from __future__ import annotations

import functools
import math
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from imagelint import __version__
from imagelint.aws import ssm as ssm_ops
from imagelint.aws.clients import Clients, default_region
from imagelint.aws.errors import AwsError, call
from imagelint.aws.merge import empty_report, merge
from imagelint.aws.progress import Progress
from imagelint.aws.signals import SignalGuard
from imagelint.collector.plan import instance_plan
from imagelint.errors import UsageError
from imagelint.report import Report, Verdict
from imagelint.session import PreparedRun, RunOptions, bundle_reports, prepare, publish


@dataclass
class FleetOptions:
    target: str = ""
    region: str | None = None
    report_bucket: str = ""
    report_prefix: str = "imagelint/"
    max_concurrency: str = "10%"
    max_errors: str = "10%"
    soak_seconds: float = 0.0
    soak_interval: float = 5.0
    version: str = __version__
    poll: float = 5.0
    timeout_margin: float = 900.0
    run: RunOptions = field(default_factory=RunOptions)
    interactive: bool = False
    role_arn: str | None = None  # assume this role (refreshing credentials) for the whole run


def parse_target(text: str) -> dict[str, object]:
    key, sep, values = text.partition("=")
    if not key.startswith("tag:") or not sep or len(key) <= 4 or not values:
        raise UsageError(f"--target {text!r}: use tag:KEY=VALUE[,VALUE...]")
    return {"Key": key, "Values": [v for v in values.split(",") if v]}


def concurrency_of(max_concurrency: str, targets: int) -> int:
    """How many invocations SSM runs at once: ``N``, or ``P%`` of the targets (at least one)."""
    text = max_concurrency.strip()
    try:
        if text.endswith("%"):
            return max(1, math.ceil(targets * float(text[:-1]) / 100))
        return max(1, int(text))
    except ValueError:
        raise UsageError(
            f"--max-concurrency {max_concurrency!r}: use a number or a percentage (10%)"
        ) from None


@dataclass(frozen=True)
class FleetTiming:
    targets: int
    waves: int
    wave_seconds: float

    @property
    def total(self) -> int:
        """The deadline, ``TimeoutSeconds`` and URL expiry: every wave, soak and margin each."""
        return math.ceil(self.waves * self.wave_seconds)


def timing(clients: Clients, target: dict[str, object], options: FleetOptions) -> FleetTiming:
    """Count the targets (running instances with the tag) and size the run's waves."""
    return sized(len(_tagged_instances(clients, target)), options)


def sized(count: int, options: FleetOptions) -> FleetTiming:
    """The waves ``count`` targets run in (SSM's MaxConcurrency at a time), and each wave's length."""
    waves = math.ceil(max(1, count) / concurrency_of(options.max_concurrency, max(1, count)))
    return FleetTiming(count, waves, options.soak_seconds + options.timeout_margin)


def run_fleet(options: FleetOptions) -> Verdict:
    target = parse_target(options.target)
    if not options.report_bucket:
        raise UsageError("fleet mode needs --report-bucket: every instance writes its reports there")
    prepared = prepare(options.run)  # once for the whole fleet
    region = default_region(options.region)
    from imagelint.aws import credentials, preflight
    from imagelint.aws.s3urls import run_expiry
    from imagelint.commands.ami import bundle_url

    # the run's length depends on the number of targets: count them on a short session first
    clients = Clients(region, credentials.run_session(options.role_arn, 0, region))
    run_id = str(uuid.uuid4())
    # the instances the tag names now: each gets its own upload URL (one that joins later has none)
    targets = _tagged_instances(clients, target)
    sizes = sized(len(targets), options)
    expires = run_expiry(targets=sizes.waves, per_wave=sizes.wave_seconds)
    if options.role_arn:
        clients = Clients(region, credentials.run_session(options.role_arn, expires + 600, region))
    preflight.check_execution_timeout(int(options.soak_seconds) + 900)
    preflight.check_bucket(
        clients.s3,
        options.report_bucket,
        f"{options.report_prefix}{run_id}/run.json",
        {"run_id": run_id, "target": options.target, "version": __version__},
    )
    credentials.check_lifetime(clients.session, expires + 600, role=bool(options.role_arn))
    plan = ssm_ops.RemotePlan(
        run_id=run_id,
        bucket=options.report_bucket,
        prefix=options.report_prefix,
        bucket_region=region,
        version=options.version,
        collector_plan=instance_plan(
            *prepared.rules, soak_seconds=options.soak_seconds, soak_interval=options.soak_interval
        ).text(),
        uploads=tuple(
            (iid, bundle_url(clients, options.report_bucket, options.report_prefix, run_id, iid, expires))
            for iid in targets
        ),
        soak_seconds=options.soak_seconds,
        soak_interval=options.soak_interval,
    )
    guard = SignalGuard()
    with guard.installed(), Progress(interactive=options.interactive) as progress:
        progress.phase("sending", f"{options.target} in {region} (run {plan.run_id})")
        command_id = ssm_ops.send(
            clients.ssm,
            plan,
            targets=[target],
            max_concurrency=options.max_concurrency,
            max_errors=options.max_errors,
            delivery_timeout=min(preflight.SSM_MAX_DELIVERY_TIMEOUT, max(30, sizes.total)),
        )
        progress.phase("running", f"command {command_id} ({sizes.targets} target(s), {sizes.waves} wave(s))")
        deadline = time.monotonic() + sizes.total
        try:
            while True:
                guard.checkpoint()
                command = call(clients.ssm.list_commands, CommandId=command_id)["Commands"][0]
                status = command.get("Status", "Pending")
                progress.update(
                    f"{status}: {command.get('CompletedCount', 0)}/{command.get('TargetCount', '?')} done, "
                    f"{command.get('ErrorCount', 0)} error(s)"
                )
                if status in ssm_ops.TERMINAL:
                    break
                if time.monotonic() > deadline:
                    ssm_ops.cancel(clients.ssm, command_id)
                    break
                time.sleep(options.poll)
        except BaseException:  # SIGINT/SIGTERM (SignalGuard), or an error: the fleet stops its command
            with guard.cleanup():
                ssm_ops.cancel(clients.ssm, command_id)
            raise
        progress.phase("collecting", f"s3://{plan.bucket}/{plan.prefix}{plan.run_id}/")
        invocations = _invocations(clients, command_id)
        report = _combine(clients, plan, command_id, invocations, options.target, prepared)
        progress.log(f"{len(invocations)} instance(s): {report.verdict.value}")
    return publish(report, options.run)


def _tagged_instances(clients: Clients, target: dict[str, object]) -> list[str]:
    """Running instances with the target's tag (SSM sends only to running, managed ones), sorted."""
    from imagelint.aws.errors import paginate

    pages = paginate(
        clients.ec2,
        "describe_instances",
        "Reservations",
        Filters=[
            {"Name": str(target["Key"]), "Values": target["Values"]},
            {"Name": "instance-state-name", "Values": ["running"]},
        ],
    )
    return sorted(i["InstanceId"] for r in pages for i in r.get("Instances", []))


def _invocations(clients: Clients, command_id: str) -> list[dict[str, object]]:
    from imagelint.aws.errors import paginate

    return paginate(clients.ssm, "list_command_invocations", "CommandInvocations", CommandId=command_id)


def _details(clients: Clients, command_id: str, invocation: dict[str, object]) -> dict[str, object]:
    """``ListCommandInvocations`` has no exit code or stderr: ask ``GetCommandInvocation`` (best effort)."""
    try:
        reply = call(
            clients.ssm.get_command_invocation, CommandId=command_id, InstanceId=str(invocation["InstanceId"])
        )
    except AwsError:
        return invocation
    return {**invocation, **reply}


def _combine(
    clients: Clients,
    plan: ssm_ops.RemotePlan,
    command_id: str,
    invocations: list[dict[str, object]],
    selector: str,
    run: PreparedRun,
) -> Report:
    target = {"kind": "fleet", "path": selector, "run_id": plan.run_id}
    if not invocations:
        return empty_report(target, f"no instance matched {selector} (or none is managed by SSM)")
    parts: list[tuple[str, Report]] = []
    rows: list[dict[str, object]] = []
    for invocation in sorted(invocations, key=lambda i: str(i.get("InstanceId"))):
        iid = str(invocation["InstanceId"])
        try:
            with tempfile.TemporaryDirectory(prefix="imagelint-fleet-") as scratch:
                bundle = ssm_ops.fetch_bundle(
                    clients.s3,
                    plan,
                    iid,
                    functools.partial(_details, clients, command_id, dict(invocation)),
                    Path(scratch),
                )
                labelled = bundle_reports(run, bundle)
            one = merge(labelled, {"kind": "host", "path": iid}, instance_id=iid)
        except ssm_ops.NoReportError as exc:
            one = empty_report({"kind": "host", "path": iid}, str(exc))
        parts.append((iid, one))
        counts = one.counts()  # true totals, listed or not
        rows.append(
            {
                "instance_id": iid,
                "status": invocation.get("Status"),
                "verdict": one.verdict.value,
                "failing": counts["failing"],
                "findings": counts["findings"],
                "errors": counts["errors"],
            }
        )
    report = merge(parts, target)
    report.facts = {"instances": rows, "command": {"run_id": plan.run_id}}
    report.notes = [
        f"{r['instance_id']}: {r['verdict']} ({r['failing']} failing, {r['findings']} finding(s), "
        f"{r['errors']} error(s))"
        for r in rows
    ] + report.notes
    return report
