"""SSM side: wait for the agent, send the collector, wait for it, fetch the bundle from S3.

The instance only answers (the InSpec "train" model): the ``commands`` of ``AWS-RunShellScript``
(:func:`remote_script`) write the collector (``imagelint/collector/collect.sh``) and its plan
(:mod:`imagelint.collector.plan`: the paths the loaded rules read, ``systemctl show``, the soak)
into a fresh work directory (``mktemp -d`` under ``$TMPDIR``, else ``/var/tmp``), run it as
``sh collect.sh DIR`` (never executing a file there, so a ``noexec`` mount is fine), and upload
the bundle with ``curl -T`` to a presigned PUT URL (SigV4, the bucket's region:
:mod:`imagelint.aws.s3urls`) at ``s3://BUCKET/PREFIX<run id>/<instance id>/bundle.tar.gz``. The work
directory is removed on every way out, a cancel by SIGTERM, SIGHUP or SIGINT included. On the
instance: a POSIX shell, coreutils, tar (gzip when present), systemctl and curl; no Python, no
package, no internet but S3.

One command per instance (:func:`send`: one ``InstanceIds`` entry): a command carries its own
instance's upload URL and no other, so a host cannot read, and so cannot forge, another host's
result. The instance needs no S3 permission at all (the presigned URL carries the runner's), and the
command asks SSM for no S3 output (``OutputS3BucketName``: the agent would write it with the
instance's role); its output comes back in ``GetCommandInvocation``. Each bundle is bound to its host:
the URL is signed with an ``x-amz-meta-imagelint-binding`` header whose value is a random token made
for that host in that run (:func:`new_binding`), sent in its command only, so S3 accepts the upload
only with it, and :func:`fetch_bundle` refuses a bundle whose stored token is not the one sent to that
host (another host, or anything else that can write the bucket, overwrote it; or it is another run's):
the host is named and the run is inconclusive.

SSM's document quota is 64 KB, and it "includes the content specified for input parameters at runtime"
(``CreateDocument``'s ``Content``, SSM API reference): :func:`check_parameters` refuses parameters over
:data:`MAX_PARAMETERS` (64 KiB less a reserve for AWS-RunShellScript's own content) before anything is
sent. A throttled ``SendCommand`` is retried with bounded backoff
(:class:`imagelint.aws.errors.Backoff`).

The upload URL may be signed with more headers than the binding, which ``curl`` then sends
(:func:`upload_headers`): ``x-amz-expected-bucket-owner`` (S3 refuses the upload when another account
owns a bucket of that name), SSE-KMS under a given key (for a bucket whose policy demands it) and the
ACL ``bucket-owner-full-control`` (a central bucket in another account). The runner's own requests
send ``ExpectedBucketOwner`` too (:func:`owner_params`), and :func:`delete_bundle` removes a bundle
once it has been read.

The runner downloads the bundle and runs the engine on it locally (:mod:`imagelint.bundle.run`)
with the local config and rule packs, so nothing needs shipping to the instance. The script exits
0 once the bundle is uploaded, whatever the image's verdict; 93 when it has no work directory, 94
when collection failed, 92 when the upload failed, 95 when it runs on another instance than the
one its upload URL is for: then the run is inconclusive.

In tests, ``IL_ROOT`` makes the collector read a directory instead of ``/`` and an empty
``IL_LIVE`` leaves out ``systemctl show`` (the stand-in machine is not the booted image).
"""

from __future__ import annotations

import hmac
import json
import re
import secrets
import shlex
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from imagelint.aws.errors import AwsError, Backoff, call, missing_object
from imagelint.aws.polling import Pace
from imagelint.collector import MAX_BUNDLE
from imagelint.collector.room import check_room
from imagelint.errors import ExitCode, ImageLintError, UsageError
from imagelint.records import dataclass

TERMINAL = {"Success", "Failed", "Cancelled", "TimedOut", "Undeliverable", "Terminated", "DeliveryTimedOut"}
BUNDLE = "bundle.tar.gz"
_EOF = "IMAGELINT_COLLECTOR_EOF"
SSM_DOCUMENT_QUOTA = 64 * 1024  # bytes: a document's content with its runtime parameters
DOCUMENT_RESERVE = 4 * 1024  # bytes kept for AWS-RunShellScript's own content (about 1 KB)
MAX_PARAMETERS = SSM_DOCUMENT_QUOTA - DOCUMENT_RESERVE
DOCUMENT = "AWS-RunShellScript"  # the SSM document imagelint sends by default (the runner's policy names it)
_DOCUMENT_NAME = re.compile(r"[a-zA-Z0-9_.-]{3,128}")  # SSM's document name pattern
_DOCUMENT_VERSION = re.compile(r"([1-9][0-9]*|\$DEFAULT|\$LATEST)")


def parse_document(text: str | None) -> tuple[str, str | None]:
    """``--document NAME[:VERSION]`` → (NAME, VERSION or None), :data:`DOCUMENT` when not given; a
    UsageError (exit 2) naming the option otherwise. The document must take the parameters
    AWS-RunShellScript takes (``commands``, ``executionTimeout``): a copy of it pinned by an
    organization, for one."""
    if text is None:
        return DOCUMENT, None
    name, sep, version = text.partition(":")
    if not _DOCUMENT_NAME.fullmatch(name) or (sep and not _DOCUMENT_VERSION.fullmatch(version)):
        raise UsageError(
            f"--document {text!r}: give NAME[:VERSION] (an SSM document name, 3-128 of a-z A-Z 0-9 _ . -; "
            "a version number, $DEFAULT or $LATEST)"
        )
    return name, version if sep else None


BINDING_META = "imagelint-binding"  # the object's x-amz-meta-imagelint-binding: the host's token


def new_binding() -> str:
    """A fresh token binding one host's bundle in one run to that host (256 random bits)."""
    return secrets.token_hex(32)


class NoReportError(ImageLintError):
    """The instance never produced a usable bundle: inconclusive."""

    exit_code = ExitCode.INCONCLUSIVE


@dataclass(frozen=True)
class RemotePlan:
    """What runs on the instance and where its bundle goes."""

    run_id: str
    bucket: str
    prefix: str  # ends with "/" or is empty
    bucket_region: str
    version: str
    collector_plan: str = ""  # plan.txt for collect.sh
    instance_id: str = ""  # the one instance this command is for
    upload_url: str = ""  # the presigned PUT URL of that instance's bundle
    binding: str = ""  # the token the upload must carry (x-amz-meta-imagelint-binding), this host's only
    soak_seconds: float = 0.0
    soak_interval: float = 5.0
    bucket_owner: str = ""  # the bucket's account: ExpectedBucketOwner on every request ("": unchecked)
    sse_kms_key: str = ""  # upload with SSE-KMS under this key (a bucket policy may demand it)
    owner_full_control: bool = (
        False  # upload with the ACL bucket-owner-full-control (another account's bucket)
    )
    document: str = DOCUMENT  # --document: the SSM document sent (AWS-RunShellScript's parameters)
    document_version: str | None = None  # ... and its pinned version (None: its default)

    def key(self, instance_id: str, name: str) -> str:
        return f"{self.prefix}{self.run_id}/{instance_id}/{name}"

    @property
    def execution_timeout(self) -> int:
        """SSM's run-time limit: the soak plus room for collection and upload."""
        return int(self.soak_seconds) + 900


# the PutObject parameters an upload URL is signed with, and the header curl must send for each
_UPLOAD_HEADERS = (
    ("ServerSideEncryption", "x-amz-server-side-encryption"),
    ("SSEKMSKeyId", "x-amz-server-side-encryption-aws-kms-key-id"),
    ("ACL", "x-amz-acl"),
    ("ExpectedBucketOwner", "x-amz-expected-bucket-owner"),
)


def owner_params(plan: RemotePlan) -> dict[str, str]:
    """``ExpectedBucketOwner`` for every S3 request on the plan's bucket: S3 refuses the request
    (403) when another account owns a bucket of that name (a deleted bucket's name taken over)."""
    return {"ExpectedBucketOwner": plan.bucket_owner} if plan.bucket_owner else {}


def upload_params(plan: RemotePlan) -> dict[str, str]:
    """The PutObject parameters (besides the binding) an upload URL of ``plan`` is signed with."""
    params = owner_params(plan)
    if plan.sse_kms_key:
        params.update(ServerSideEncryption="aws:kms", SSEKMSKeyId=plan.sse_kms_key)
    if plan.owner_full_control:
        params["ACL"] = "bucket-owner-full-control"
    return params


def upload_headers(plan: RemotePlan) -> list[tuple[str, str]]:
    """The headers the upload must carry (signed headers of its URL), in :func:`upload_params`' order."""
    params = upload_params(plan)
    return [(header, params[name]) for name, header in _UPLOAD_HEADERS if name in params]


def remote_script(plan: RemotePlan) -> list[str]:
    """The ``commands`` of AWS-RunShellScript, one shell line each."""
    from imagelint.collector import script_text

    q = shlex.quote
    headers = "".join(f" -H {q(f'{name}: {value}')}" for name, value in upload_headers(plan))
    lines = [
        f"# imagelint {plan.version} run {plan.run_id}: collect, upload; the analysis runs at home",
        "set -u",
        'IID="${AWS_SSM_INSTANCE_ID:-$(TOKEN=$(curl -fsS -X PUT '
        '-H "X-aws-ec2-metadata-token-ttl-seconds: 60" '
        'http://169.254.169.254/latest/api/token) && curl -fsS -H "X-aws-ec2-metadata-token: $TOKEN" '
        'http://169.254.169.254/latest/meta-data/instance-id)}"',
        f'[ "$IID" = {q(plan.instance_id)} ] || {{ echo "imagelint: run {plan.run_id} has no upload URL '
        'for $IID" >&2; exit 95; }',
        'W=$(mktemp -d "${TMPDIR:-/var/tmp}/imagelint.XXXXXX") || exit 93',
        # the work directory goes on every way out: done, failed, or stopped by a signal a shell can
        # catch (the trap runs once the command in the foreground returns); SIGKILL leaves it behind
        "trap 'rm -rf \"$W\"' EXIT",
        "trap 'exit 129' HUP",
        "trap 'exit 130' INT",
        "trap 'exit 143' TERM",
        f"URL={q(plan.upload_url)}",
        f"BINDING={q(plan.binding)}",
        f"cat > \"$W/collect.sh\" <<'{_EOF}'",
        *script_text().splitlines(),
        _EOF,
        f"cat > \"$W/plan.txt\" <<'{_EOF}'",
        *plan.collector_plan.splitlines(),
        _EOF,
        '[ -z "${IL_ROOT:-}" ] || printf \'root %s\\n\' "$IL_ROOT" >> "$W/plan.txt"',
        '[ -n "${IL_LIVE-x}" ] || echo "show 0" >> "$W/plan.txt"',
        'BUNDLE=$(sh "$W/collect.sh" "$W") || { echo "imagelint: collection failed" >&2; exit 94; }',
        f'curl -fsS --retry 3 -H "x-amz-meta-{BINDING_META}: $BINDING"{headers} -T "$BUNDLE" "$URL" || '
        f'{{ echo "imagelint: upload to s3://{plan.bucket} failed" >&2; exit 92; }}',
        'echo "imagelint: bundle uploaded ($(wc -c < "$BUNDLE") bytes)"',
        "exit 0",
    ]
    return lines


def wait_online(
    ssm: Any,
    instance_id: str,
    *,
    timeout: float,
    poll: float,
    doomed: Callable[[], str | None] = lambda: None,
) -> None:
    """Poll ``DescribeInstanceInformation`` until the instance's agent is Online; end early when
    ``doomed`` gives a reason it never will be (:class:`imagelint.aws.boot.BootWatch`)."""
    deadline = time.monotonic() + timeout
    pace = Pace(poll)
    while True:
        reply = pace.look(
            lambda: call(
                ssm.describe_instance_information,
                Filters=[{"Key": "InstanceIds", "Values": [instance_id]}],
            )
        )
        infos = [] if reply is None else reply.get("InstanceInformationList", [])
        if infos and infos[0].get("PingStatus") == "Online":
            return
        reason = doomed()
        if reason:
            raise NoReportError(f"{instance_id} will not register with SSM: {reason}")
        if time.monotonic() > deadline:
            raise NoReportError(
                f"{instance_id} never registered with SSM within {timeout:.0f}s{pace.note} (check: the "
                "image has the SSM agent enabled, --instance-profile has AmazonSSMManagedInstanceCore, "
                "the subnet reaches the SSM endpoints)"
            )
        pace.pause()


def parameters(plan: RemotePlan) -> dict[str, list[str]]:
    """The ``Parameters`` of the instance's AWS-RunShellScript command."""
    return {"commands": remote_script(plan), "executionTimeout": [str(plan.execution_timeout)]}


def check_parameters(params: dict[str, list[str]], instance_id: str) -> int:
    """The size of ``params`` as sent (JSON, UTF-8); a UsageError (exit 2) over :data:`MAX_PARAMETERS`."""
    size = len(json.dumps(params, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_PARAMETERS:
        raise UsageError(
            f"the command for {instance_id} has {size:,} bytes of parameters; SSM's 64 KB document quota "
            f"leaves {MAX_PARAMETERS:,} for them: load fewer rule packs or select fewer rules"
        )
    return size


MIN_DELIVERY_TIMEOUT = 30  # SendCommand's TimeoutSeconds lower bound


def send_request(plan: RemotePlan, *, delivery_timeout: int = 600, marker: str = "") -> dict[str, Any]:
    """SendCommand's parameters for ``plan``'s one instance; ``marker`` (see :func:`send_marker`) is
    its ``Comment``. ``delivery_timeout`` (``TimeoutSeconds``): how long the invocation may wait to start."""
    params = parameters(plan)
    check_parameters(params, plan.instance_id)
    return {
        "InstanceIds": [plan.instance_id],
        "DocumentName": plan.document,
        **({"DocumentVersion": plan.document_version} if plan.document_version else {}),
        "Parameters": params,
        "TimeoutSeconds": delivery_timeout,
        "Comment": (marker or f"imagelint run {plan.run_id}")[:MAX_COMMENT],
        "MaxConcurrency": "1",
        "MaxErrors": "0",
    }


MAX_COMMENT = 100  # SendCommand's Comment, at most


def send_marker(plan: RemotePlan) -> str:
    """A ``Comment`` no other command has: ``imagelint run RUN INSTANCE NONCE`` (at most 79
    characters). SendCommand takes no client token; a send whose reply was lost is found again by
    this comment among the instance's commands (:func:`find_sent`)."""
    return f"imagelint run {plan.run_id} {plan.instance_id} {secrets.token_hex(4)}"


def find_sent(ssm: Any, instance_id: str, marker: str, since: str) -> str | None:
    """The id of the command sent to ``instance_id`` since ``since`` whose ``Comment`` is ``marker``,
    or None: SSM has no such command (the send never reached it)."""
    from imagelint.aws.errors import paginate

    listed = paginate(
        ssm,
        "list_commands",
        "Commands",
        InstanceId=instance_id,
        Filters=[{"key": "InvokedAfter", "value": since}],
    )
    return next((str(c["CommandId"]) for c in listed if c.get("Comment") == marker), None)


def send(ssm: Any, plan: RemotePlan, *, delivery_timeout: int = 600, backoff: Backoff | None = None) -> str:
    """Send ``plan`` to its one instance; the command id. A throttled call is retried by ``backoff``."""
    request = send_request(plan, delivery_timeout=delivery_timeout)
    reply = (backoff or Backoff()).call(ssm.send_command, **request)
    return str(reply["Command"]["CommandId"])


def wait_invocation(
    ssm: Any,
    command_id: str,
    instance_id: str,
    *,
    timeout: float,
    poll: float,
    on_poll: Callable[[str], None] = lambda status: None,
) -> dict[str, Any]:
    """Poll ``GetCommandInvocation`` until a final status (or the deadline: then cancel it)."""
    deadline = time.monotonic() + timeout
    pace = Pace(poll)
    while True:
        reply = pace.look(lambda: _invocation(ssm, command_id, instance_id)) or {"Status": "Pending"}
        status = str(reply.get("Status", "Pending"))
        on_poll(status)
        if status in TERMINAL:
            return reply
        if time.monotonic() > deadline:
            cancel(ssm, command_id, [instance_id])
            details = f"no result within {timeout:.0f}s{pace.note}"
            return {**reply, "Status": "TimedOut", "StatusDetails": details}
        pace.pause()


def _invocation(ssm: Any, command_id: str, instance_id: str) -> dict[str, Any]:
    """GetCommandInvocation's answer; Pending while SSM does not know the invocation yet."""
    try:
        reply: dict[str, Any] = call(ssm.get_command_invocation, CommandId=command_id, InstanceId=instance_id)
    except AwsError as exc:
        if exc.code != "InvocationDoesNotExist":
            raise
        return {"Status": "Pending"}
    return reply


def cancel(ssm: Any, command_id: str, instance_ids: list[str] | None = None) -> None:
    try:
        params: dict[str, Any] = {"CommandId": command_id}
        if instance_ids:
            params["InstanceIds"] = instance_ids
        call(ssm.cancel_command, **params)
    except AwsError:
        pass  # best effort: the instance is terminated next anyway


def fetch_bundle(
    s3: Any,
    plan: RemotePlan,
    instance_id: str,
    invocation: dict[str, Any] | Callable[[], dict[str, Any]],
    directory: Path,
) -> Path:
    """Download the instance's bundle into ``directory``; NoReportError (inconclusive) when there is
    none. ``invocation`` (``GetCommandInvocation``'s reply, or a function that fetches it only when
    needed) gives the status, exit code and stderr for the message. Without ``s3:ListBucket`` a
    missing object answers 403, not 404: either way the instance did not upload."""
    key = plan.key(instance_id, BUNDLE)
    try:
        reply = call(s3.get_object, Bucket=plan.bucket, Key=key, **owner_params(plan))
    except AwsError as exc:
        # 404, or 403 without s3:ListBucket: not uploaded; but a 403 from KMS is a refused read
        if not missing_object(exc) or "kms" in exc.detail.lower():
            raise
        if callable(invocation):
            invocation = invocation()
        status = invocation.get("Status", "?")
        code = invocation.get("ResponseCode", "?")
        details = " ".join(str(invocation.get("StatusDetails", "")).split())[:300]
        status = f"{status} ({details})" if details and details != status else status
        stderr = " ".join(str(invocation.get("StandardErrorContent", "")).split())[-300:]
        detail = f"; stderr: {stderr}" if stderr else ""
        raise NoReportError(
            f"{instance_id} did not upload its bundle (no s3://{plan.bucket}/{key}); "
            f"command {status}, exit code {code}{detail}"
        ) from None
    stored = str((reply.get("Metadata") or {}).get(BINDING_META, ""))
    if not plan.binding or not hmac.compare_digest(stored.encode(), plan.binding.encode()):
        reply["Body"].close()
        raise NoReportError(
            f"{instance_id}: the bundle at s3://{plan.bucket}/{key} is not bound to {instance_id} (it does "
            "not carry the token sent to that host in this run): another host or another run wrote it; "
            "not read"
        )
    size = int(reply.get("ContentLength") or 0)
    try:
        if size > MAX_BUNDLE:
            raise NoReportError(f"{instance_id}: its bundle is {size:,} bytes, over {MAX_BUNDLE:,}; not read")
        check_room(directory, size, instance_id)  # before a byte is written: the other hosts' room
        path = Path(tempfile.mkstemp(prefix=f"{instance_id}-", suffix=".tar.gz", dir=directory)[1])
        got = 0
        with path.open("wb") as out:
            for chunk in iter(lambda: reply["Body"].read(1 << 20), b""):
                got += len(chunk)
                if got > MAX_BUNDLE:
                    raise NoReportError(f"{instance_id}: its bundle is over {MAX_BUNDLE:,} bytes; not read")
                out.write(chunk)
    finally:
        reply["Body"].close()
    return path


def delete_bundle(s3: Any, plan: RemotePlan, instance_id: str) -> None:
    """Delete the instance's bundle (it holds files such as the image's ``/etc/shadow``) once it has
    been read; an AwsError when S3 refuses."""
    call(s3.delete_object, Bucket=plan.bucket, Key=plan.key(instance_id, BUNDLE), **owner_params(plan))


def discard_bundle(s3: Any, plan: RemotePlan, instance_id: str) -> str | None:
    """:func:`delete_bundle`, once the bundle has been read (``ami check`` and ``fleet``, unless
    ``--keep-bundles``); when S3 refuses, the warning line naming the object left (the report is not
    lost for it), else None."""
    try:
        delete_bundle(s3, plan, instance_id)
    except AwsError as exc:
        return f"could not delete s3://{plan.bucket}/{plan.key(instance_id, BUNDLE)}: {exc.message}"
    return None
