"""`imagelint fleet`: audit (and soak) running instances through SSM Run Command, one combined report.

Every running instance with the tag gets a row. The ones SSM manages as Linux hosts
(``DescribeInstanceInformation`` lists their agent as Online, ``PlatformType`` Linux) each get a command
of their own (:func:`imagelint.aws.ssm.send_request`: one ``InstanceIds`` entry, that instance's presigned
upload URL and no other host's, parameters checked under SSM's 64 KB quota before anything is sent). The
others are *not covered*: listed with the reason, and the run is inconclusive unless
``--allow-unmanaged``; so are the instances SSM manages as another platform (Windows, macOS): *not a
Linux host*, never sent a command.

One host never stops the fleet: a ``SendCommand`` refused for one instance (``InvalidInstanceId``: its
agent went offline or the instance was scaled in between listing and sending;
``UnsupportedPlatformType``; any other error, throttling that outlasts the retries included) makes
that instance a *not-sent* row with the error as its reason and counts as a failed command towards
``--max-errors``; a ``GetCommandInvocation`` error ends that invocation alone; an agent that stops
answering mid-run (``PingStatus`` other than Online for ``offline_grace`` seconds while its command
runs) has its command cancelled, and its row says so; a ``ListCommands`` error other than throttling
has that poll ask each running instance alone; anything that fails for one instance once its command
ended (S3 refusing its download, a bundle that does not decode, the analysis, the local disk:
:mod:`imagelint.commands.host_failure`) is its *no-report* row. The others are judged and the report
is written.

With one command per instance, imagelint runs the rollout SSM would run for one command
(:class:`Rollout`): at most ``--max-concurrency`` invocations at a time (N, or P% of the managed
instances), the next command as one ends, and no new command once more than ``--max-errors``
commands have failed (the rest are *not sent*). The sends run concurrently, at most
:data:`SENDS_AT_ONCE` in flight and fewer while SSM throttles (:class:`imagelint.aws.call_window.CallWindow`);
a throttled send is retried with bounded backoff (:class:`imagelint.aws.errors.Backoff`, on a client
without botocore's own retries) and the throttles are counted in ``facts.command``. ``SendCommand``
takes no client token: each send's ``Comment`` is unique (:func:`imagelint.aws.ssm.send_marker`), and
a send whose reply was lost (a 5xx, a dropped connection, a timeout) is looked for by it among the
instance's commands (``ListCommands``) before it is sent again or called not sent. Each poll asks one paged
``ListCommands`` for the commands still executing; ``GetCommandInvocation`` gives the status of
those that are not. An invocation running longer than the soak plus ``timeout_margin`` is cancelled.

Then each instance's bundle is fetched from ``s3://BUCKET/PREFIX<run id>/<instance id>/`` (every S3
request with ``ExpectedBucketOwner``: the caller's account or ``--bucket-owner``), deleted once read
unless ``--keep-bundles`` (it holds the image's ``/etc/shadow``), and analysed with the local config
and rule packs (:mod:`imagelint.bundle.run`). The report holds the
findings of all instances (subjects prefixed with the instance id), ``facts.instances`` with a row
per tagged instance (``coverage``: checked, no-report, not-sent, not-managed), and one verdict,
decided by :func:`imagelint.report.verdict.decide`: the worst of the hosts' verdicts, where a host
without a usable report (not sent, no report, not managed or not Linux without ``--allow-unmanaged``)
is an error. So the exit code is 1 when any checked host fails (a fail is never hidden by an
unreadable part), else 3 when any host is an error, else 0.
"""

from __future__ import annotations

import math
import re
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from imagelint import __version__
from imagelint.aws import ssm as ssm_ops
from imagelint.aws.call_window import CallWindow
from imagelint.aws.clients import Clients, default_region
from imagelint.aws.errors import THROTTLED, AwsError, Backoff, call, paginate
from imagelint.aws.polling import Pace
from imagelint.aws.progress import Progress
from imagelint.aws.signals import SignalGuard
from imagelint.collector.plan import instance_plan
from imagelint.commands import host_failure
from imagelint.commands.host_failure import judged_then_removed, saved_apart
from imagelint.errors import UsageError
from imagelint.records import dataclass
from imagelint.report import Report, ReportError, Verdict
from imagelint.report.merge import empty_report, merge, with_rows
from imagelint.session import PreparedRun, RunOptions, bundle_reports, prepare, publish

INSTANCE_IDS_PER_CALL = 50  # DescribeInstanceInformation: ids per InstanceIds filter (and MaxResults)
FETCHES_AT_ONCE = 8  # bundles downloaded in parallel from S3 (and on disk at once)
SENDS_AT_ONCE = 16  # SendCommand calls in flight at most (fewer while SSM throttles)
# a SendCommand answered so, or not answered at all, may have reached SSM: look before sending again
UNANSWERED = frozenset(
    {"InternalServerError", "InternalFailure", "ServiceUnavailable", "500", "502", "503", "504"}
    | {"ConnectionClosedError", "ReadTimeoutError", "ResponseParserError", "HTTPClientError"}
)


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
    allow_unmanaged: bool = False  # tagged instances SSM does not manage do not make the run inconclusive
    credentials_expire_at: datetime | None = None  # when the environment's credentials expire
    send_backoff: float = 1.0  # seconds: the first wait after a throttled SendCommand (it doubles)
    offline_grace: float = 300.0  # seconds an agent may be off line mid-command before it is given up
    keep_bundles: bool = False  # leave the bundles in the bucket once read
    bucket_owner: str = ""  # the account that owns the bucket ("": the caller's own)
    sse_kms_key: str = ""  # upload the bundles with SSE-KMS under this key
    document: tuple[str, str | None] = (ssm_ops.DOCUMENT, None)  # --document NAME[:VERSION]


ACCOUNT = re.compile(r"[0-9]{12}")
KMS_KEY = re.compile(r"[A-Za-z0-9:/_-]{1,2048}")  # a key id, key ARN, alias name or alias ARN


def _bucket_terms(clients: Clients, options: FleetOptions) -> tuple[str, bool]:
    """The account that must own the bucket, and whether that is another account than the caller's
    (then the uploads give it full control: ``bucket-owner-full-control``)."""
    from imagelint.aws.kms import caller_account

    if options.bucket_owner and not ACCOUNT.fullmatch(options.bucket_owner):
        raise UsageError(f"--bucket-owner {options.bucket_owner!r}: use the 12-digit account id")
    if options.sse_kms_key and not KMS_KEY.fullmatch(options.sse_kms_key):
        raise UsageError(f"--sse-kms-key {options.sse_kms_key!r}: use a KMS key id, key ARN or alias ARN")
    own = caller_account(clients)
    owner = options.bucket_owner or own
    return owner, owner != own


def parse_target(text: str) -> dict[str, object]:
    key, sep, values = text.partition("=")
    if not key.startswith("tag:") or not sep or len(key) <= 4 or not values:
        raise UsageError(f"--target {text!r}: use tag:KEY=VALUE[,VALUE...]")
    return {"Key": key, "Values": [v for v in values.split(",") if v]}


def _share(text: str, targets: int, option: str, least: int) -> int:
    """``N``, or ``P%`` of ``targets`` rounded up; at least ``least``."""
    value = text.strip()
    try:
        if value.endswith("%"):
            return max(least, math.ceil(targets * float(value[:-1]) / 100))
        return max(least, int(value))
    except ValueError:
        raise UsageError(f"{option} {text!r}: use a number or a percentage (10%)") from None


def concurrency_of(max_concurrency: str, targets: int) -> int:
    """How many invocations run at once: ``N``, or ``P%`` of the targets (at least one)."""
    return _share(max_concurrency, targets, "--max-concurrency", 1)


def errors_allowed(max_errors: str, targets: int) -> int:
    """How many commands may fail before no new one is sent: ``N``, or ``P%`` of the targets."""
    return _share(max_errors, targets, "--max-errors", 0)


@dataclass(frozen=True)
class FleetTiming:
    waves: int
    wave_seconds: float

    @property
    def total(self) -> int:
        """The run's longest length, and its URLs' expiry: every wave, soak and margin each."""
        return math.ceil(self.waves * self.wave_seconds)


def sized(count: int, options: FleetOptions) -> FleetTiming:
    """The waves ``count`` targets run in (--max-concurrency at a time), and each wave's length."""
    waves = math.ceil(max(1, count) / concurrency_of(options.max_concurrency, max(1, count)))
    return FleetTiming(waves, options.soak_seconds + options.timeout_margin)


@dataclass
class Coverage:
    """What became of one tagged instance."""

    instance_id: str
    coverage: str  # checked | no-report | not-sent | not-managed | not-linux
    reason: str = ""
    invocation: dict[str, Any] = field(default_factory=dict)  # GetCommandInvocation's last answer


def run_fleet(options: FleetOptions) -> Verdict:
    target = parse_target(options.target)
    if not options.report_bucket:
        raise UsageError("fleet mode needs --report-bucket: every instance writes its reports there")
    prepared = prepare(options.run)  # once for the whole fleet
    region = default_region(options.region)
    from imagelint.aws import credentials, preflight
    from imagelint.aws.s3urls import run_expiry
    from imagelint.commands.ami import bound_plan

    # the run's length depends on the number of targets: count them on a short session first
    clients = Clients(region, credentials.run_session(options.role_arn, 0, region))
    run_id = str(uuid.uuid4())
    # the instances the tag names now; each one SSM manages gets its own upload URL
    tagged = _tagged_instances(clients, target)
    managed, unmanaged = _managed(clients, tagged)  # unmanaged: instance id → (coverage, reason)
    sizes = sized(len(managed), options)
    backoff = Backoff(first=options.send_backoff)
    # the last wave's URLs, signed as its commands are sent, live until this long after the start
    expires = run_expiry(targets=sizes.waves, per_wave=sizes.wave_seconds, margin=backoff.longest)
    if options.role_arn:
        clients = Clients(region, credentials.run_session(options.role_arn, expires + 600, region))
    preflight.check_execution_timeout(int(options.soak_seconds) + 900)
    owner, foreign = _bucket_terms(clients, options)
    base = ssm_ops.RemotePlan(
        run_id=run_id,
        bucket=options.report_bucket,
        prefix=options.report_prefix,
        bucket_region=region,
        version=options.version,
        collector_plan=instance_plan(
            *prepared.rules, soak_seconds=options.soak_seconds, soak_interval=options.soak_interval
        ).text(),
        soak_seconds=options.soak_seconds,
        soak_interval=options.soak_interval,
        bucket_owner=owner,
        sse_kms_key=options.sse_kms_key,
        owner_full_control=foreign,
        document=options.document[0],
        document_version=options.document[1],
    )
    preflight.check_bucket(
        clients.s3,
        options.report_bucket,
        f"{options.report_prefix}{run_id}/run.json",
        {"run_id": run_id, "target": options.target, "version": __version__},
        upload=ssm_ops.upload_params(base),
    )
    credentials.check_lifetime(
        clients.session, expires + 600, role=bool(options.role_arn), expires_at=options.credentials_expire_at
    )
    # each command's URL lives its own run and its send's throttled retries from the moment it is
    # signed, again just before its send (Rollout.sign): these first ones size the parameters
    command_life = math.ceil(sizes.wave_seconds + backoff.longest)
    plans = {iid: bound_plan(clients, base, iid, command_life) for iid in managed}
    # every command's parameters fit SSM's quota, or nothing is sent
    largest = max((ssm_ops.check_parameters(ssm_ops.parameters(p), i) for i, p in plans.items()), default=0)
    rollout = Rollout(
        clients,
        plans,
        window=concurrency_of(options.max_concurrency, max(1, len(managed))),
        errors_allowed=errors_allowed(options.max_errors, max(1, len(managed))),
        per_command=sizes.wave_seconds,
        poll=options.poll,
        backoff=backoff,
        offline_grace=options.offline_grace,
        sign=lambda iid: bound_plan(clients, base, iid, command_life),
    )
    guard = SignalGuard()
    with guard.installed(), Progress(interactive=options.interactive) as progress:
        progress.phase(
            "sending",
            f"{options.target} in {region} (run {run_id}): {len(managed)} managed, "
            f"{len(unmanaged)} not covered (not managed by SSM, or not Linux), {rollout.window} at a time",
        )
        rollout.run(guard, progress)
        progress.phase("collecting", f"s3://{base.bucket}/{base.prefix}{run_id}/")
        covered = rollout.outcomes() + [
            Coverage(iid, coverage, why) for iid, (coverage, why) in sorted(unmanaged.items())
        ]
        report = _combine(clients, base, plans, covered, options, prepared)
        report.facts["command"] = {
            "run_id": run_id,
            "commands": len(rollout.commands),
            "throttled": rollout.backoff.throttled,
            "reconciled": rollout.reconciled,
            "list_errors": rollout.list_errors,
            "max_parameter_bytes": largest,
            "concurrency": rollout.window,
        }
        progress.log(f"{len(tagged)} instance(s), {len(unmanaged)} not covered: {report.verdict.value}")
    return publish(report, options.run)


class Rollout:
    """One command per instance: at most ``window`` running, none sent once more than
    ``errors_allowed`` have failed, each cancelled after ``per_command`` seconds. The sends run
    concurrently (at most :data:`SENDS_AT_ONCE`, fewer while SSM throttles: :class:`CallWindow`), so a
    host whose send is throttled and waits does not hold up the others."""

    def __init__(
        self,
        clients: Clients,
        plans: dict[str, ssm_ops.RemotePlan],
        *,
        window: int,
        errors_allowed: int,
        per_command: float,
        poll: float,
        backoff: Backoff,
        offline_grace: float = 300.0,
        sign: Callable[[str], ssm_ops.RemotePlan] | None = None,
    ) -> None:
        from imagelint.aws.preflight import SSM_MAX_DELIVERY_TIMEOUT

        self.clients, self.plans, self.window, self.errors_allowed = clients, plans, window, errors_allowed
        self.per_command, self.poll, self.backoff = per_command, poll, backoff
        self.pace = Pace(poll)
        # signs an instance's plan again right before its command is sent: its upload URL then lives
        # from the send on, however long earlier waves and throttled sends took
        self.sign = sign
        delivery = max(ssm_ops.MIN_DELIVERY_TIMEOUT, math.ceil(per_command))
        self.delivery_timeout = min(SSM_MAX_DELIVERY_TIMEOUT, delivery)
        self.queue = sorted(plans)
        self.commands: dict[str, str] = {}  # instance id → command id
        self.running: dict[str, float] = {}  # instance id → deadline (monotonic)
        self.sending: dict[str, Future[str]] = {}  # instance id → its send, in flight
        self.calls = CallWindow(max(1, min(window, SENDS_AT_ONCE)))
        self._counting = threading.Lock()  # the throttle and reconciliation counts, kept by the senders
        self.throttles: dict[str, int] = {}  # instance id → its throttled sends
        self.sender = clients.unretried("ssm")  # made here: its creation is not for threads
        self.stopping = threading.Event()  # set when the run stops: the senders send nothing more
        self.reconciled = 0  # sends whose reply was lost, found sent by their marker
        self.list_errors = 0  # ListCommands answers that were errors (each running host asked alone)
        self.ended: dict[str, dict[str, Any]] = {}  # instance id → the invocation's final answer
        self.failed = 0
        self.refused: dict[str, str] = {}  # instance id → why its command was not sent
        self.offline_grace = offline_grace
        self.offline_since: dict[str, float] = {}  # instance id → when its agent was first seen off line
        # ListCommands' InvokedAfter: a little before the first send (clock skew)
        self.since = (datetime.now(UTC) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def run(self, guard: SignalGuard, progress: Progress) -> None:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(self.calls.ceiling, thread_name_prefix="imagelint-send")
        try:
            while self.queue or self.running or self.sending:
                guard.checkpoint()
                self._fill(pool)
                self._landed()
                if not self.running and not self.sending:
                    if not self.queue or self.failed > self.errors_allowed:
                        break
                    continue
                self.pace.pause()
                guard.checkpoint()
                self._landed()
                self._reap()
                progress.update(
                    f"{len(self.ended)}/{len(self.plans)} done, {len(self.running)} running, "
                    f"{len(self.sending)} sending, {self.failed} failed, "
                    f"{self.backoff.throttled} throttled send(s)"
                )
        except BaseException:  # SIGINT/SIGTERM (SignalGuard), or an error: stop every running command
            with guard.cleanup():
                self.queue.clear()
                self.stopping.set()  # a sender waiting out a throttle gives up at once
                pool.shutdown(wait=True, cancel_futures=True)  # a send in flight lands, or not
                self._landed()
                for iid in self.running:
                    ssm_ops.cancel(self.clients.ssm, self.commands[iid])
            raise
        pool.shutdown(wait=True)

    def _fill(self, pool: Executor) -> None:
        """Start the sends of the next instances while the window has room."""
        while (
            self.queue
            and len(self.running) + len(self.sending) < self.window
            and self.failed <= self.errors_allowed
        ):
            iid = self.queue.pop(0)
            self.sending[iid] = pool.submit(self._send, iid)

    def _landed(self) -> None:
        """The sends that are over: their instance runs its command, or is a not-sent row."""
        for iid, sent in list(self.sending.items()):
            if not sent.done():
                continue
            del self.sending[iid]
            try:
                self.commands[iid] = sent.result()
            except AwsError as exc:  # this host only: the others are still sent theirs
                throttled = self.throttles.get(iid, 0)
                after = f" after {throttled} throttled attempt(s)" if exc.code in THROTTLED else ""
                self.refused[iid] = f"not sent: {exc.api} refused{after}: {exc.code}: {exc.detail}"
                self.failed += 1
                continue
            except Exception as exc:  # signing its URL, or anything local: this host only too
                self.refused[iid] = f"not sent: {host_failure.reason(exc)}"
                self.failed += 1
                continue
            self.running[iid] = time.monotonic() + self.per_command

    def _send(self, iid: str) -> str:
        """Send the instance its command (in a sender thread); its command id. A throttled send is
        retried after a backoff, with the call window halved; a send whose reply was lost (a 5xx, a
        dropped connection, a timeout: SSM may have taken it) is looked for by its marker before it is
        sent again, and once more before the instance is called not sent."""
        if self.sign is not None:
            self.plans[iid] = self.sign(iid)
        plan = self.plans[iid]
        marker = ssm_ops.send_marker(plan)
        request = ssm_ops.send_request(plan, delivery_timeout=self.delivery_timeout, marker=marker)
        for attempt in range(self.backoff.attempts):
            if self.stopping.is_set():
                raise AwsError("ssm", "SendCommand", "Stopped", "the run stopped before this send")
            with self.calls.slot() as started:
                try:
                    reply = call(self.sender.send_command, **request)
                except AwsError as exc:
                    if exc.code in THROTTLED:
                        self.calls.throttled(started)
                        with self._counting:
                            self.backoff.throttled += 1
                            self.throttles[iid] = self.throttles.get(iid, 0) + 1
                    elif exc.code in UNANSWERED:
                        found = self._reconcile(iid, marker)
                        if found:
                            return found
                    else:
                        raise
                    if attempt == self.backoff.attempts - 1:
                        raise
                else:
                    self.calls.answered()
                    return str(reply["Command"]["CommandId"])
            self.stopping.wait(self.backoff.delay(attempt))
        raise AssertionError("unreachable")  # the last attempt returns or raises

    def _reconcile(self, iid: str, marker: str) -> str | None:
        """The command a send whose reply was lost made, if SSM has it (None if not, or not known)."""
        try:
            found = ssm_ops.find_sent(self.clients.ssm, iid, marker, self.since)
        except AwsError:
            return None
        if found:
            with self._counting:
                self.reconciled += 1
        return found

    def _reap(self) -> None:
        """End the invocations that are no longer executing (or are past their deadline). When
        ListCommands answers an error other than throttling, each running instance is asked alone."""
        try:
            listed = self._executing()
        except AwsError:
            self.list_errors += 1
            listed = []
        if listed is None:
            return  # throttled past the retries: asked again at the next poll
        executing = {c["CommandId"] for c in listed}
        self._end(executing)

    def _executing(self) -> list[dict[str, Any]] | None:
        """The commands of this run still executing (one paged ListCommands); None when throttled."""
        return self.pace.look(
            lambda: paginate(
                self.clients.ssm,
                "list_commands",
                "Commands",
                Filters=[
                    {"key": "InvokedAfter", "value": self.since},
                    {"key": "ExecutionStage", "value": "Executing"},
                ],
            )
        )

    def _end(self, executing: set[str]) -> None:
        """End the running invocations that are not in ``executing``, or past their deadline."""
        now = time.monotonic()
        lost = self._lost(now)
        for iid, deadline in list(self.running.items()):
            command_id = self.commands[iid]
            if command_id in executing and now <= deadline and iid not in lost:
                continue
            reply = self._invocation(command_id, iid)
            if reply.get("Status") not in ssm_ops.TERMINAL:
                if now <= deadline and iid not in lost:
                    continue  # not listed yet, or between two states: asked again next poll
                ssm_ops.cancel(self.clients.ssm, command_id)
                why = lost.get(iid) or f"no result within {self.per_command:.0f}s"
                reply = {**reply, "Status": "Cancelled", "StatusDetails": f"{why}; cancelled"}
            del self.running[iid]
            self.ended[iid] = reply
            self.failed += reply.get("Status") != "Success"

    def _lost(self, now: float) -> dict[str, str]:
        """The running instances whose agent has been off line (not Online in SSM) for longer than
        ``offline_grace``, with the reason; a blip shorter than that is ridden out."""
        pings: dict[str, str] = {}
        try:
            pings = _pings(self.clients, sorted(self.running))
        except AwsError:
            return {}  # asked again next poll; the command's own deadline still bounds the wait
        lost: dict[str, str] = {}
        for iid in self.running:
            ping = pings.get(iid, "not registered")
            if ping == "Online":
                self.offline_since.pop(iid, None)
                continue
            since = self.offline_since.setdefault(iid, now)
            if now - since >= self.offline_grace:
                lost[iid] = f"its SSM agent went off line mid-run (PingStatus {ping} for {now - since:.0f}s)"
        return lost

    def _invocation(self, command_id: str, instance_id: str) -> dict[str, Any]:
        """GetCommandInvocation's answer; an error for this one host ends its invocation (a throttle,
        or an invocation not there yet, is asked again next poll)."""
        try:
            reply: dict[str, Any] = call(
                self.clients.ssm.get_command_invocation, CommandId=command_id, InstanceId=instance_id
            )
        except AwsError as exc:
            if exc.code == "InvocationDoesNotExist" or exc.code in THROTTLED:
                return {"Status": "Pending"}
            return {
                "Status": "Failed",
                "StatusDetails": f"GetCommandInvocation failed: {exc.code}: {exc.detail}",
            }
        return reply

    def outcomes(self) -> list[Coverage]:
        """A row for each managed instance: ended (checked or no report, decided on its bundle), or
        never sent its command because too many had failed."""
        rows = [Coverage(iid, "checked", invocation=reply) for iid, reply in self.ended.items()]
        reason = (
            f"not sent: {self.failed} command(s) failed, over --max-errors ({self.errors_allowed} allowed)"
        )
        refused = [Coverage(iid, "not-sent", why) for iid, why in self.refused.items()]
        return rows + refused + [Coverage(iid, "not-sent", reason) for iid in self.queue]


def _tagged_instances(clients: Clients, target: dict[str, object]) -> list[str]:
    """Running instances with the target's tag, sorted."""
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


def _information(clients: Clients, instance_ids: list[str]) -> dict[str, dict[str, Any]]:
    """``DescribeInstanceInformation`` of the instances SSM knows among ``instance_ids``, by id."""
    seen: dict[str, dict[str, Any]] = {}
    for start in range(0, len(instance_ids), INSTANCE_IDS_PER_CALL):
        chunk = instance_ids[start : start + INSTANCE_IDS_PER_CALL]
        for info in paginate(
            clients.ssm,
            "describe_instance_information",
            "InstanceInformationList",
            Filters=[{"Key": "InstanceIds", "Values": chunk}],
            MaxResults=INSTANCE_IDS_PER_CALL,
        ):
            seen[str(info.get("InstanceId"))] = info
    return seen


def _pings(clients: Clients, instance_ids: list[str]) -> dict[str, str]:
    """The ``PingStatus`` of each instance SSM knows among ``instance_ids``."""
    return {i: str(info.get("PingStatus", "?")) for i, info in _information(clients, instance_ids).items()}


def _managed(clients: Clients, instance_ids: list[str]) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """The instances whose SSM agent is Online on a Linux host, and the others with their coverage
    and reason (not managed: their PingStatus, or not registered with SSM at all; not Linux: the
    platform SSM reports)."""
    seen = _information(clients, instance_ids)
    managed: list[str] = []
    others: dict[str, tuple[str, str]] = {}
    for i in instance_ids:
        info = seen.get(i)
        ping = str(info.get("PingStatus", "?")) if info else ""
        platform = str(info.get("PlatformType", "?"))[:40] if info else ""
        if ping != "Online":
            why = f"SSM agent {ping}" if info else "no SSM agent registered"
            others[i] = ("not-managed", f"not managed by SSM ({why}): not covered")
        elif platform != "Linux":
            others[i] = ("not-linux", f"not a Linux host (SSM PlatformType {platform}): not covered")
        else:
            managed.append(i)
    return managed, others


def _reports(
    clients: Clients,
    plans: dict[str, ssm_ops.RemotePlan],
    rows: list[Coverage],
    run: PreparedRun,
    *,
    keep_bundles: bool = False,
) -> tuple[dict[str, Report], list[ReportError]]:
    """The report of each instance that was sent its command: its bundle downloaded (FETCHES_AT_ONCE
    at a time, so at most that many are on disk), checked against the binding sent to that instance
    (its own plan), deleted from the bucket once read (unless ``keep_bundles``), and analysed here.
    Whatever goes wrong for one instance (S3 refuses its download, its bundle does not decode, the
    scratch disk fills up) is that instance's row; warnings: the bundles S3 would not delete."""
    from concurrent.futures import ThreadPoolExecutor

    s3 = clients.s3  # made once, here: a boto3 client is shared by threads, its creation is not
    reports: dict[str, Report] = {}
    warnings: list[ReportError] = []
    checked = [row for row in rows if row.coverage == "checked"]

    def fetch(row: Coverage) -> Path:
        plan = plans[row.instance_id]
        path = saved_apart(
            "imagelint-fleet-",
            lambda own: ssm_ops.fetch_bundle(s3, plan, row.instance_id, row.invocation, own),
        )
        left = None if keep_bundles else ssm_ops.discard_bundle(s3, plan, row.instance_id)
        if left:
            warnings.append(ReportError(left))
        return path

    with ThreadPoolExecutor(FETCHES_AT_ONCE) as pool:
        for start in range(0, len(checked), FETCHES_AT_ONCE):
            fetching = [(row, pool.submit(fetch, row)) for row in checked[start : start + FETCHES_AT_ONCE]]
            for row, bundle in fetching:
                reports[row.instance_id] = _judged(run, row, bundle)
    return reports, warnings


def _judged(run: PreparedRun, row: Coverage, bundle: Future[Path]) -> Report:
    """The instance's report from its downloaded bundle; when anything failed for it (the download,
    the decoding, the analysis, the local disk), an inconclusive report and a no-report row."""
    host = {"kind": "host", "path": row.instance_id}
    try:
        labelled = judged_then_removed(bundle, lambda path: bundle_reports(run, path))
    except Exception as exc:  # this host alone (a signal is a BaseException: it still stops the run)
        row.coverage, row.reason = "no-report", host_failure.reason(exc)
        return empty_report(host, row.reason)
    return merge(labelled, host, instance_id=row.instance_id)


def _combine(
    clients: Clients,
    plan: ssm_ops.RemotePlan,
    plans: dict[str, ssm_ops.RemotePlan],
    covered: list[Coverage],
    options: FleetOptions,
    run: PreparedRun,
) -> Report:
    target = {"kind": "fleet", "path": options.target, "run_id": plan.run_id}
    if not covered:
        return empty_report(target, f"no running instance matched {options.target}")
    covered = sorted(covered, key=lambda r: r.instance_id)
    reports, warnings = _reports(clients, plans, covered, run, keep_bundles=options.keep_bundles)
    parts: list[tuple[str, Report]] = []
    rows: list[dict[str, object]] = []
    uncovered: list[ReportError] = []
    for row in covered:
        one = None
        if row.coverage in ("not-managed", "not-linux"):
            accept = "" if options.allow_unmanaged else " (--allow-unmanaged accepts that)"
            uncovered.append(ReportError(f"{row.instance_id}: {row.reason}{accept}", where=row.instance_id))
        else:
            host = {"kind": "host", "path": row.instance_id}
            one = reports.get(row.instance_id) or empty_report(host, f"{row.instance_id}: {row.reason}")
            parts.append((row.instance_id, one))
        counts = one.counts() if one else {"failing": 0, "findings": 0, "errors": 0}  # true totals
        rows.append(
            {
                "instance_id": row.instance_id,
                "coverage": row.coverage,
                "status": row.invocation.get("Status"),
                "verdict": one.verdict.value if one and row.coverage != "not-sent" else None,
                "failing": counts["failing"],
                "findings": counts["findings"],
                "errors": counts["errors"],
                "reason": row.reason or None,
            }
        )
    report = merge(parts, target) if parts else empty_report(target, "no instance was checked")
    report.warnings += warnings
    if options.allow_unmanaged:
        report.warnings += uncovered
    else:
        report.errors += uncovered
    return with_rows(report, rows, facts_key="instances", name_key="instance_id")
