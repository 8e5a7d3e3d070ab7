"""SSM side: wait for the agent, send the imagelint script, wait for it, read the reports from S3.

The script (:func:`remote_script`) runs on the instance as root under ``AWS-RunShellScript``:

1. installs imagelint into a fresh venv (pinned version from PyPI, or a wheel given by a presigned
   URL), unless ``IL`` (path of an installed ``imagelint``) and ``PY`` (its Python) are already set;
2. downloads the run's shipped config and rule packs (:mod:`imagelint.aws.inputs`, uploaded to
   ``s3://BUCKET/PREFIX<run id>/input/``) through presigned URLs into the work directory (exit 91
   when it cannot);
3. runs ``imagelint audit / --live`` and, when a soak is asked for, ``imagelint soak``, each writing
   its JSON report into a work directory (text output goes to stdout, which SSM caps at 24,000
   characters: stdout is for people, the reports are for the CLI), both with ``-c`` / ``-r`` for the
   shipped files, so the local run's waivers, expected units, parameters and packs apply;
4. uploads ``audit.json``, ``soak.json`` and ``status.json`` (the exit codes) with boto3 (an
   imagelint dependency, so present in its venv) to
   ``s3://BUCKET/PREFIX<run id>/<instance id>/``; the instance id comes from
   ``AWS_SSM_INSTANCE_ID``, which the SSM agent sets for every command.

The script exits 0 once the reports are uploaded, whatever the verdict (the verdict is in the
reports; a failing image must not count as an SSM error against ``--max-errors``), and 90-93 when
it could not install, run or upload: then the CLI has no report and the run is inconclusive.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from imagelint.aws.errors import AwsError, call, missing_object
from imagelint.errors import ExitCode, ImageLintError

TERMINAL = {"Success", "Failed", "Cancelled", "TimedOut", "Undeliverable", "Terminated", "DeliveryTimedOut"}
REPORT_FILES = ("audit.json", "soak.json")


class NoReportError(ImageLintError):
    """The instance never produced a usable report: inconclusive."""

    exit_code = ExitCode.INCONCLUSIVE


@dataclass(frozen=True)
class RemotePlan:
    """What runs on the instance and where its reports go."""

    run_id: str
    bucket: str
    prefix: str  # ends with "/" or is empty
    bucket_region: str
    version: str
    install_url: str | None = None  # presigned URL of a wheel; None = the pinned version from PyPI
    soak_seconds: float = 0.0
    soak_interval: float = 5.0
    audit_args: tuple[str, ...] = ()  # e.g. --fail-on, --select, passed to both commands
    inputs: tuple[tuple[str, str], ...] = ()  # shipped files: (path relative to input/, presigned URL)
    input_args: tuple[tuple[str, str], ...] = ()  # ("-c" | "-r", relative path): passed to both commands

    def key(self, instance_id: str, name: str) -> str:
        return f"{self.prefix}{self.run_id}/{instance_id}/{name}"

    @property
    def execution_timeout(self) -> int:
        """SSM's run-time limit: the soak plus room for install, audit and upload."""
        return int(self.soak_seconds) + 900


def remote_script(plan: RemotePlan) -> list[str]:
    """The ``commands`` of AWS-RunShellScript, one shell line each."""
    q = shlex.quote
    extra = " ".join([*(f'{opt} "$W/in"/{q(rel)}' for opt, rel in plan.input_args), *map(q, plan.audit_args)])
    if plan.install_url:
        install = (
            f'curl -fsSL -o "$W/imagelint.whl" {q(plan.install_url)} '
            '&& "$W/venv/bin/pip" install -q "$W/imagelint.whl"'
        )
    else:
        install = f'"$W/venv/bin/pip" install -q {q("imagelint==" + plan.version)}'
    lines = [
        f"# imagelint {plan.version} run {plan.run_id}",
        "set -u",
        "W=$(mktemp -d /tmp/imagelint.XXXXXX) || exit 93",
        'IID="${AWS_SSM_INSTANCE_ID:-$(TOKEN=$(curl -fsS -X PUT '
        '-H "X-aws-ec2-metadata-token-ttl-seconds: 60" '
        'http://169.254.169.254/latest/api/token) && curl -fsS -H "X-aws-ec2-metadata-token: $TOKEN" '
        'http://169.254.169.254/latest/meta-data/instance-id)}"',
        'if [ -z "${IL:-}" ]; then',
        '  python3 -m venv "$W/venv" || { echo "imagelint: python3 -m venv failed" >&2; exit 90; }',
        f'  {install} || {{ echo "imagelint: install failed" >&2; exit 90; }}',
        '  IL="$W/venv/bin/imagelint"; PY="$W/venv/bin/python"',
        "fi",
    ]
    if plan.inputs:
        source = f"{plan.prefix}{plan.run_id}/input/"
        download = (
            "import os, sys, urllib.request\n"
            "d = sys.argv[1]\n"
            f"for rel, url in {[list(pair) for pair in plan.inputs]!r}:\n"
            "    path = os.path.join(d, rel)\n"
            "    os.makedirs(os.path.dirname(path), exist_ok=True)\n"
            "    with urllib.request.urlopen(url, timeout=60) as r, open(path, 'wb') as f:\n"
            "        f.write(r.read())\n"
        )
        lines.append(
            f'"$PY" -c {q(download)} "$W/in" || {{ echo "imagelint: could not download the config and '
            f'rule packs from s3://{plan.bucket}/{source}" >&2; exit 91; }}'
        )
    lines += [
        'cd "$W"',
        f'"$IL" audit "${{IL_ROOT:-/}}" ${{IL_LIVE---live}} -f text -f json:"$W/audit.json" {extra}; '
        "AUDIT=$?",
    ]
    if plan.soak_seconds > 0:
        lines.append(
            f'"$IL" soak -d {plan.soak_seconds:g}s -i {plan.soak_interval:g}s -f text -f json:"$W/soak.json" '
            f"{extra}; SOAK=$?"
        )
    else:
        lines.append("SOAK=")
    dest = plan.prefix + plan.run_id
    upload = (
        "import boto3, json, os, sys\n"
        "w, iid = sys.argv[1], sys.argv[2]\n"
        f"s3 = boto3.client('s3', region_name={plan.bucket_region!r})\n"
        "status = {'audit': os.environ.get('AUDIT'), 'soak': os.environ.get('SOAK') or None}\n"
        f"for name in {list(REPORT_FILES)!r}:\n"
        "    path = os.path.join(w, name)\n"
        "    if os.path.exists(path):\n"
        f"        s3.upload_file(path, {plan.bucket!r}, {dest!r} + '/' + iid + '/' + name)\n"
        f"s3.put_object(Bucket={plan.bucket!r}, Key={dest!r} + '/' + iid + '/status.json',"
        " Body=json.dumps(status).encode())\n"
    )
    lines += [
        "export AUDIT SOAK",
        f'"$PY" -c {q(upload)} "$W" "$IID" '
        f'|| {{ echo "imagelint: upload to s3://{plan.bucket} failed" >&2; exit 92; }}',
        'echo "imagelint: reports uploaded (audit exit $AUDIT${SOAK:+, soak exit $SOAK})"',
        'rm -rf "$W"',
        "exit 0",
    ]
    return lines


def wait_online(
    ssm: Any, instance_id: str, *, timeout: float, poll: float, stop: Callable[[], bool] = lambda: False
) -> None:
    """Poll ``DescribeInstanceInformation`` until the instance's agent is Online."""
    deadline = time.monotonic() + timeout
    while True:
        reply = call(
            ssm.describe_instance_information, Filters=[{"Key": "InstanceIds", "Values": [instance_id]}]
        )
        infos = reply.get("InstanceInformationList", [])
        if infos and infos[0].get("PingStatus") == "Online":
            return
        if time.monotonic() > deadline:
            raise NoReportError(
                f"{instance_id} never registered with SSM within {timeout:.0f}s (check: the image has "
                "the SSM agent enabled, --instance-profile has AmazonSSMManagedInstanceCore, "
                "the subnet reaches the SSM endpoints)"
            )
        time.sleep(poll)


def send(
    ssm: Any,
    plan: RemotePlan,
    *,
    instance_ids: list[str] | None = None,
    targets: list[dict[str, Any]] | None = None,
    max_concurrency: str = "50",
    max_errors: str = "0",
    delivery_timeout: int = 600,
) -> str:
    """``delivery_timeout`` (``TimeoutSeconds``): how long an invocation may wait to start; a fleet's
    later waves wait for the earlier ones (:func:`imagelint.aws.fleet.timing`)."""
    params: dict[str, Any] = {
        "DocumentName": "AWS-RunShellScript",
        "Parameters": {"commands": remote_script(plan), "executionTimeout": [str(plan.execution_timeout)]},
        "TimeoutSeconds": delivery_timeout,
        "Comment": f"imagelint run {plan.run_id}"[:100],
        "OutputS3BucketName": plan.bucket,
        "OutputS3KeyPrefix": f"{plan.prefix}{plan.run_id}/ssm",
        "MaxConcurrency": max_concurrency,
        "MaxErrors": max_errors,
    }
    if instance_ids:
        params["InstanceIds"] = instance_ids
    if targets:
        params["Targets"] = targets
    return str(call(ssm.send_command, **params)["Command"]["CommandId"])


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
    while True:
        try:
            reply: dict[str, Any] = call(
                ssm.get_command_invocation, CommandId=command_id, InstanceId=instance_id
            )
        except AwsError as exc:
            if exc.code != "InvocationDoesNotExist":
                raise
            reply = {"Status": "Pending"}
        status = str(reply.get("Status", "Pending"))
        on_poll(status)
        if status in TERMINAL:
            return reply
        if time.monotonic() > deadline:
            cancel(ssm, command_id, [instance_id])
            return {**reply, "Status": "TimedOut", "StatusDetails": f"no result within {timeout:.0f}s"}
        time.sleep(poll)


def cancel(ssm: Any, command_id: str, instance_ids: list[str] | None = None) -> None:
    try:
        params: dict[str, Any] = {"CommandId": command_id}
        if instance_ids:
            params["InstanceIds"] = instance_ids
        call(ssm.cancel_command, **params)
    except AwsError:
        pass  # best effort: the instance is terminated next anyway


def fetch_reports(
    s3: Any,
    plan: RemotePlan,
    instance_id: str,
    invocation: dict[str, Any] | Callable[[], dict[str, Any]],
) -> list[dict[str, Any]]:
    """The instance's JSON reports from S3; NoReportError (inconclusive) when none is usable.

    ``invocation`` (``GetCommandInvocation``'s reply, or a function that fetches it only when the
    reports are missing) gives the status, exit code and stderr for the error message."""
    found: list[dict[str, Any]] = []
    expected = ["audit.json"] + (["soak.json"] if plan.soak_seconds > 0 else [])
    problems: list[str] = []
    for name in expected:
        key = plan.key(instance_id, name)
        try:
            body = call(s3.get_object, Bucket=plan.bucket, Key=key)["Body"].read()
        except AwsError as exc:
            if missing_object(exc):  # 404, or 403 without s3:ListBucket: not uploaded
                problems.append(f"the instance did not upload {name}")
                continue
            raise
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            problems.append(f"{name} is not JSON ({len(body)} bytes)")
            continue
        if not _looks_like_report(data):
            problems.append(f"{name} is not an imagelint report")
            continue
        found.append(data)
    if problems:
        if callable(invocation):
            invocation = invocation()
        status = invocation.get("Status", "?")
        code = invocation.get("ResponseCode", "?")
        stderr = " ".join(str(invocation.get("StandardErrorContent", "")).split())[-300:]
        detail = f"; stderr: {stderr}" if stderr else ""
        raise NoReportError(
            f"{instance_id} did not report ({', '.join(problems)} at s3://{plan.bucket}/"
            f"{plan.key(instance_id, '')}); command {status}, exit code {code}{detail}"
        )
    return found


def _looks_like_report(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and data.get("verdict") in ("pass", "fail", "inconclusive")
        and isinstance(data.get("findings"), list)
        and isinstance(data.get("rules"), list)
        and isinstance(data.get("target"), dict)
    )
