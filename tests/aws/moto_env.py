"""A local AWS for the AMI and fleet tests: moto's server, a thin SSM front, and a stand-in instance agent.

Use::

    from tests.aws.moto_env import MotoEnv

    with MotoEnv() as aws:                      # moto server + front on loopback, agent thread running
        aws.agent.rootfs = sample_image_dir     # what every "instance" looks like inside
        proc = run_cli("ami", ami_id, "--report-bucket", aws.bucket, env=aws.env)
        assert aws.leftovers(run_tagged=True) == []

or the pytest fixture ``moto_env`` (``tests/aws/conftest.py``). ``aws.env`` holds the environment a
user would set (``AWS_ENDPOINT_URL``, dummy credentials, ``AWS_DEFAULT_REGION``); ``aws.client(svc)``
gives boto3 clients on the same endpoint; ``aws.image_id`` is a moto built-in AMI and
``aws.bucket`` an existing bucket; ``aws.profile`` an instance profile with a role. moto's default VPC is
completed as AWS makes it: an internet gateway and a ``0.0.0.0/0`` route to it in the main table.

Why a front: moto 5.2 runs no SSM command (every invocation is "Success", empty output, and
``send_command(InstanceIds=[a])`` fans out to every instance: a thousand per-host commands to a
thousand instances would be a million invocations), and it does not implement
``DescribeInstanceInformation``. The front is a small HTTP proxy that
forwards everything to moto except SSM Run Command, which it answers itself with the
:class:`InstanceAgent`:

- ``SendCommand``: an instance that is not running, or not managed (``agent.unmanaged``, or
  ``agent.online`` false), is refused with ``InvalidInstanceId`` as SSM does; otherwise the command
  goes to the agent, which makes an invocation per ``InstanceIds`` entry; unknown documents fail
  (status ``Failed``). Each request is recorded in ``env.sent`` (:class:`SentCommand`: its instance
  ids, the size of its ``Parameters`` as JSON, the presigned URLs in them), and
  ``env.throttle_every = n`` answers every n-th ``SendCommand`` with ``ThrottlingException``
  (counted in ``env.throttled``) before it reaches the agent; ``env.send_faults[instance_id] = code``
  answers every SendCommand naming that instance with ``code``, which must be an error botocore's
  model documents for SendCommand (``InvalidInstanceId``, ``UnsupportedPlatformType``, ...) or
  ``ThrottlingException`` (then it is throttled every time, and counted);
- ``ListCommands`` (by ``CommandId``, ``InstanceId``, the ``InvokedAfter``/``InvokedBefore``/
  ``Status``/``ExecutionStage``/``DocumentName`` filters, paged by ``MaxResults``/``NextToken``);
- for each running instance it runs the command's script for real with bash, as root, with
  ``IL_ROOT`` set to :attr:`InstanceAgent.rootfs` (the collector reads that tree instead of ``/``)
  and ``IL_LIVE`` empty (this machine is not the booted image: no ``systemctl show``; a soak samples
  this machine's cgroups), and ``AWS_SSM_INSTANCE_ID`` set as the SSM agent does. The script uploads
  its bundle to moto's S3 itself through the presigned URL; the agent also writes stdout where SSM would
  (``PREFIX/COMMAND/INSTANCE/awsrunShellScript/0.awsrunShellScript/stdout``). With ``agent.canned``
  (a bundle's bytes), the agent runs no script and PUTs those bytes to the command's one upload URL
  instead, so a fleet of a thousand answers in seconds;
- ``GetCommandInvocation`` / ``ListCommands`` report the agent's real
  statuses (``InProgress`` while the script runs, ``Failed`` with the exit code when it fails);
  ``DescribeInstanceInformation`` lists running instances as ``Online`` while ``agent.online`` is
  true (set it false to model an image without a working SSM agent), except those in
  ``agent.unmanaged`` (tagged instances without an SSM agent), with ``PlatformType`` Linux unless
  ``agent.platform[instance_id]`` says another; an instance in ``agent.goes_offline`` loses its agent
  as its command arrives (listed ``ConnectionLost`` from then on, its invocation ``InProgress`` and
  nothing run); ``CancelCommand`` stops it: SIGTERM to its process group (the shell and the collector
  under it), as the environment's shutdown does before SIGKILL.

AWS behaviour moto does not model, injected by the front (:meth:`MotoEnv.fault_for`): ``env.console`` (a
function giving the text, e.g. a booted container's real console) answers ``GetConsoleOutput`` instead
of moto's fixed sample; ``env.ebs_default_key`` answers ``GetEbsDefaultKmsKeyId`` (moto does not
implement it; AWS's ``alias/aws/ebs`` until a test sets a key); ``env.not_found[action] = n``
answers the next ``n`` EC2 ``action`` requests
that name an id with ``Invalid….NotFound`` (eventual consistency right after a create);
``env.refuse[action] = (code, message)`` answers every such EC2 request with that error (e.g.
``CreateTags``; IAM's too, whose query protocol botocore parses alike); ``env.image_fields[ami] =
{"architecture": "arm64_mac"}`` answers DescribeImages with those fields of that AMI (its XML names)
replaced or added; ``env.throttle_calls[action] = n`` answers the next ``n`` such requests (EC2 or IAM)
with the service's throttling error (``RequestLimitExceeded``, ``Throttling``), recorded in
``env.answered_throttled``; ``DeleteSecurityGroup`` of a group an instance that is not yet terminated
still uses answers ``DependencyViolation`` (moto deletes it), and so do the next ``env.group_held``
requests after that (the terminated instance's network interface holding the group for a while); the
next ``env.profile_lag`` ``RunInstances`` that name an instance profile answer ``InvalidParameterValue``
``Invalid IAM Instance Profile name`` (IAM's eventual consistency: EC2 does not know a profile for some
seconds after its creation); ``env.launch_faults[(subnet, instance_type)] = code`` answers every
RunInstances (not its DryRun) launching that type in that subnet (``"*"``: any subnet, none given too)
with that error, as EC2 answers ``InsufficientInstanceCapacity`` and moto never does;
``env.on_call[action]`` is called with each EC2 request's form before it is forwarded; an access
key in ``env.expired_keys`` gets ``ExpiredToken`` for any request; ``env.seen_keys`` lists the
access key of every request, ``env.seen_calls`` each with its query-protocol ``Action``.
S3 and SSM answers per host (issue 48): ``env.s3_faults[instance_id] = (status, code)`` answers every
GET of that instance's bundle with that S3 error (``InternalError`` 500, ``SlowDown`` 503,
``ExpiredToken``, ``KMS.DisabledException``, ``AccessDenied`` from KMS; the paths asked are in
``env.s3_gets``); ``env.bundle_delete_fault = (status, code)`` answers every DELETE of a bundle;
``env.ssm_refuse[operation] = [code, n]`` answers the next ``n`` calls of that SSM operation (``-1``:
every one) with that error; an instance in ``env.lost_send_replies`` has its next ``SendCommand``
carried out and its reply lost (the connection closed unanswered). What S3 and a central bucket's policy
refuse and moto does not: ``env.bucket_owners[bucket] = account`` refuses (403) a request whose
``x-amz-expected-bucket-owner`` names another account and records each request on that bucket in
``env.s3_requests`` (method, path, the owner it expected); a bucket in ``env.sse_kms_required`` /
``env.full_control_required`` refuses an upload without ``x-amz-server-side-encryption: aws:kms`` /
``x-amz-acl: bucket-owner-full-control``.

Failure injection per run: ``agent.fault`` = ``None`` | ``"command-fails"`` (the script is replaced
by a collection failure, exit 94) | ``"hang"`` (the script is replaced by a long sleep: only a cancel
ends it) | ``"empty-report"`` | ``"malformed-report"`` (the uploaded ``bundle.tar.gz`` is overwritten
after the script ran). Per instance: ``agent.faults[instance_id]`` overrides ``agent.fault`` and
``agent.rootfs_for[instance_id]`` overrides ``agent.rootfs`` (fleet runs with one bad instance);
``agent.overwrites[a] = b`` has host ``a`` (canned bundles) overwrite ``b``'s bundle once it is
there, as a host whose role may write the bucket could (``agent.overwritten`` lists the keys).
EBS direct API faults (latency, throttling, denial, corruption, expired tokens) and the correction
of moto's BlockSize: ``aws.ebs`` (:mod:`tests.aws.ebs_front`).
``agent.container`` (an ``nsenter`` prefix from :func:`tests.nspawn.booted`) runs the commands with
``sh`` inside a booted image instead, with nothing of this machine in their environment;
``agent.container_for[instance_id]`` does so per instance.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.aws.ebs_front import EbsFaults
from tests.support import need, wait_for

REGION = "us-east-1"
TERMINAL = {"Success", "Failed", "Cancelled", "TimedOut"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class SentCommand:
    """What one SendCommand request carried, as the front received it."""

    instance_ids: tuple[str, ...]
    parameters_bytes: int  # its Parameters as compact JSON, UTF-8
    urls: tuple[str, ...]  # the presigned URLs in its Parameters


PRESIGNED = re.compile(r"https?://[^\s'\"]*X-Amz-Signature=[0-9a-f]+")


def documented_errors(service: str, operation: str) -> frozenset[str]:
    """The error codes botocore's model of ``service`` documents for ``operation``, and the throttling
    every AWS API may answer."""
    import botocore.session

    model = botocore.session.get_session().get_service_model(service).operation_model(operation)
    return frozenset({shape.name for shape in model.error_shapes} | {"ThrottlingException"})


class SendFaults(dict[str, str]):
    """Instance id → the error every ``SendCommand`` naming it is answered with (``ThrottlingException``:
    throttled, every time). Only a code SendCommand documents in botocore's model is accepted."""

    def __setitem__(self, instance_id: str, code: str) -> None:
        if code not in documented_errors("ssm", "SendCommand"):
            raise ValueError(f"SendCommand does not answer {code!r}")
        super().__setitem__(instance_id, code)


class Invocation:
    def __init__(self, command_id: str, instance_id: str) -> None:
        self.command_id, self.instance_id = command_id, instance_id
        self.status = "Pending"
        self.code = -1
        self.stdout = ""
        self.stderr = ""
        self.proc: subprocess.Popen[str] | None = None

    def to_api(self) -> dict[str, Any]:
        return {
            "CommandId": self.command_id,
            "InstanceId": self.instance_id,
            "DocumentName": "AWS-RunShellScript",
            "PluginName": "aws:runShellScript",
            "Status": self.status,
            "StatusDetails": self.status,
            "ResponseCode": self.code,
            "StandardOutputContent": self.stdout[:24000],
            "StandardErrorContent": self.stderr[:8000],
            "StandardOutputUrl": "",
        }


class InstanceAgent:
    """The instance side: runs what SSM was asked to run, for real, on a local image tree."""

    def __init__(self, env: MotoEnv) -> None:
        self.env = env
        self._rootfs: Path | None = None
        self.online = True
        # the documents it runs as AWS-RunShellScript (an organization's pinned copy: --document)
        self.shell_documents = {"AWS-RunShellScript"}
        self.fault: str | None = None
        self.faults: dict[str, str | None] = {}
        self.rootfs_for: dict[str, Path] = {}
        # an nsenter prefix into a booted container (tests/nspawn.py): the command then runs in it,
        # with sh, with the container's own tools, systemd and journal, as on a real instance
        self.container: list[str] | None = None
        self.container_for: dict[str, list[str]] = {}  # per instance (a fleet of booted images)
        self.unmanaged: set[str] = set()  # running instances without a registered SSM agent
        self.canned: bytes | None = None  # a bundle to upload instead of running the script
        self.platform: dict[str, str] = {}  # instance id → its SSM PlatformType (default Linux)
        self.goes_offline: set[str] = set()  # instances whose agent is lost once their command arrives
        self.lost: set[str] = set()  # instances whose agent is off line (PingStatus ConnectionLost)
        self.overwrites: dict[str, str] = {}  # a hostile host → the host whose bundle it overwrites
        self.overwritten: list[str] = []  # the keys it overwrote
        self.commands: dict[str, dict[str, Any]] = {}  # command id → the command, in order sent
        self.invocations: dict[tuple[str, str], Invocation] = {}
        self._of_command: dict[str, list[Invocation]] = {}
        self._running: tuple[set[str], float] = (set(), 0.0)  # (running instance ids, when listed)
        self.lock = threading.Lock()
        self._inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._workers: list[threading.Thread] = []

    @property
    def rootfs(self) -> Path | None:
        """The image tree the collector reads, on this machine (``container`` unset)."""
        return self._rootfs

    @rootfs.setter
    def rootfs(self, tree: Path | None) -> None:
        # set in the test's own thread, so a missing curl is the test's named skip; the script runs
        # in the agent's thread later, where it would only be a failed upload
        need(shutil.which("curl") is not None, "curl is not installed: the collector uploads with it")
        self._rootfs = tree

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        with self.lock:
            procs = [i.proc for i in self.invocations.values() if i.proc]
        for proc in procs:
            _stop_group(proc, signal.SIGTERM)
        for worker in self._workers:
            worker.join(10)
        for proc in procs:
            _stop_group(proc, signal.SIGKILL)

    # what the front asks
    def managed(self, ids: list[str] | None = None) -> list[str]:
        """The running instances (among ``ids``) whose SSM agent is registered and online. EC2 is
        asked again when an id is not among the running ones it listed, or that list is 10 s old (a
        thousand SendCommands would otherwise be a thousand DescribeInstances of a thousand
        instances)."""
        if not self.online or ids == []:
            return []
        running, when = self._running
        if (ids and not set(ids) <= running) or time.monotonic() - when > 10:
            ec2 = self.env.client("ec2", direct=True)
            reply = ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["running"]}])
            running = {i["InstanceId"] for r in reply["Reservations"] for i in r["Instances"]}
            self._running = (running, time.monotonic())
        return [i for i in ids or sorted(running) if i in running and i not in self.unmanaged]

    def submit(self, command: dict[str, Any]) -> None:
        """A command SSM accepted: its invocations start (Pending), the loop runs them."""
        with self.lock:
            self.commands[command["CommandId"]] = command
            mine = self._of_command[command["CommandId"]] = []
            for iid in command["InstanceIds"]:
                inv = self.invocations[(command["CommandId"], iid)] = Invocation(command["CommandId"], iid)
                mine.append(inv)
                if iid in self.goes_offline:
                    self.lost.add(iid)
        self._inbox.put(command)

    def command_status(self, command_id: str) -> str:
        with self.lock:
            mine = [i.status for i in self._of_command.get(command_id, [])]
        if not mine:
            return "Success"
        if any(s not in TERMINAL for s in mine):
            return "InProgress"
        return "Success" if all(s == "Success" for s in mine) else "Failed"

    def cancel(self, command_id: str) -> None:
        with self.lock:
            for inv in self._of_command.get(command_id, []):
                if inv.status not in TERMINAL:
                    inv.status = "Cancelled"
                    if inv.proc:
                        _stop_group(inv.proc, signal.SIGTERM)

    # the loop
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                command = self._inbox.get(timeout=0.2)
            except queue.Empty:
                continue
            for iid in command["InstanceIds"]:
                worker = threading.Thread(target=self._run, args=(command, iid), daemon=True)
                self._workers.append(worker)
                worker.start()

    def _run(self, command: dict[str, Any], iid: str) -> None:
        inv = self.invocations[(command["CommandId"], iid)]
        if command["DocumentName"] not in self.shell_documents:
            inv.status, inv.code, inv.stderr = "Failed", 1, f"document {command['DocumentName']} unknown here"
            return
        script = "\n".join(command["Parameters"]["commands"])
        if iid in self.lost:  # the agent took the command, then went off line: it stays in progress
            inv.status = "InProgress"
            return None
        if self.canned is not None:
            return self._upload_canned(inv, script)
        fault = self.faults.get(iid, self.fault)
        if fault == "command-fails":
            script = 'echo "imagelint: collection failed" >&2; exit 94'
        elif fault == "hang":
            script = "exec sleep 600"
        env = {
            **os.environ,
            **self.env.direct_env,
            "IL_ROOT": str(self.rootfs_for.get(iid, self._rootfs)),
            "IL_LIVE": "",
            "AWS_SSM_INSTANCE_ID": iid,
            "NO_COLOR": "1",
        }
        argv = ["bash", "-c", script]
        container = self.container_for.get(iid, self.container)
        if container is not None:
            # the container's namespaces but this host's network (nsenter without -n): the instance
            # reaches S3 (moto on this host's loopback) as an instance reaches AWS, from its own
            # private network namespace it could not
            argv = [*(word for word in container if word != "-n"), "sh", "-c", script]
            env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "AWS_SSM_INSTANCE_ID": iid}
        inv.status = "InProgress"
        proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        inv.proc = proc
        out, err = proc.communicate()
        if self._stop.is_set():  # the environment is shutting down: its S3 may already be gone
            with self.lock:
                inv.stdout, inv.stderr, inv.code = out, err, proc.returncode
            return
        s3 = self.env.client("s3", direct=True)
        if fault in ("empty-report", "malformed-report"):  # the host's own upload: with its own token
            body = b"" if fault == "empty-report" else b"\x1f\x8boops"
            s3.put_object(
                Bucket=self.env.bucket, Key=_bundle_key(command, iid), Body=body, Metadata=_binding(script)
            )
        if command.get("OutputS3BucketName"):
            key = (
                f"{command['OutputS3KeyPrefix']}/{command['CommandId']}/{iid}"
                "/awsrunShellScript/0.awsrunShellScript/stdout"
            )
            s3.put_object(Bucket=command["OutputS3BucketName"], Key=key, Body=out.encode())
        with self.lock:
            inv.stdout, inv.stderr, inv.code = out, err, proc.returncode
            if inv.status != "Cancelled":
                inv.status = "Success" if proc.returncode == 0 else "Failed"

    def _upload_canned(self, inv: Invocation, script: str) -> None:
        """PUT the canned bundle to the one upload URL the command carries, as the collector would."""
        inv.status = "InProgress"
        (url,) = re.findall(r"^URL='([^']+)'$", script, re.M)
        # as curl -T: a body of bytes (urllib would call it a form, which S3 would parse as one), with
        # the binding header the URL is signed with
        headers = {"Content-Type": "application/octet-stream", **_upload_headers(script)}
        headers.update({f"x-amz-meta-{k}": v for k, v in _binding(script).items()})
        request = urllib.request.Request(url, data=self.canned, method="PUT", headers=headers)
        with urllib.request.urlopen(request, timeout=60) as reply:
            ok = reply.status == 200
        victim = self.overwrites.get(inv.instance_id)
        if ok and victim:
            self._overwrite(self.commands[inv.command_id], victim, _binding(script))
        with self.lock:
            inv.code, inv.stdout = (0, "imagelint: bundle uploaded (canned)") if ok else (92, "")
            if inv.status != "Cancelled":
                inv.status = "Success" if ok else "Failed"

    def _overwrite(self, command: dict[str, Any], victim: str, metadata: dict[str, str]) -> None:
        """A hostile host whose role may write the bucket (s3:PutObject on the prefix, as the instance
        role of earlier versions had): once the victim's bundle is there, replace it with this host's
        own, carrying the only token this host knows, its own."""
        s3 = self.env.client("s3", direct=True)
        key = _bundle_key(command, victim)
        wait_for(
            lambda: s3.list_objects_v2(Bucket=self.env.bucket, Prefix=key).get("KeyCount", 0) > 0, 60, 0.1
        )
        s3.put_object(Bucket=self.env.bucket, Key=key, Body=self.canned or b"", Metadata=metadata)
        self.overwritten.append(key)


def _bundle_key(command: dict[str, Any], iid: str) -> str:
    """Where ``iid``'s bundle of the command's run goes (the default --report-prefix)."""
    return f"imagelint/{command['Comment'].split()[2]}/{iid}/bundle.tar.gz"


def _upload_headers(script: str) -> dict[str, str]:
    """The headers the script's curl sends besides the binding (-H 'NAME: VALUE', shell-quoted)."""
    return dict(re.findall(r"-H '(x-amz-[a-z-]+): ([^']*)'", script))


def _binding(script: str) -> dict[str, str]:
    """The binding token the command's script uploads with, as S3 object metadata."""
    tokens = re.findall(r"^BINDING='?([0-9a-f]*)'?$", script, re.M)  # shlex.quote leaves hex unquoted
    return {"imagelint-binding": tokens[0]} if tokens else {}


class _Front(BaseHTTPRequestHandler):
    env: MotoEnv

    def log_message(self, *args: Any) -> None:
        pass

    def _forward(self, method: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.env.moto_port, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection",)}
        conn.request(method, self.path, body=body or None, headers=headers)
        reply = conn.getresponse()
        data = reply.read()
        out = {
            k: v
            for k, v in reply.getheaders()
            if k.lower() not in ("transfer-encoding", "connection", "content-length")
        }
        conn.close()
        return reply.status, out, data

    def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, data: dict[str, Any], status: int = 200) -> None:
        self._send(
            status, {"Content-Type": "application/x-amz-json-1.1"}, json.dumps(data, default=str).encode()
        )

    def _handle(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        fault = self.env.fault_for(self.headers.get("Authorization", ""), body)
        if fault is not None:
            return self._send(400, {"Content-Type": "text/xml"}, fault)
        target = self.headers.get("X-Amz-Target", "")
        if target and self.env.take_throttle(target.rpartition(".")[2]):  # JSON protocol: SSM
            return self._json({"__type": "ThrottlingException", "message": "Rate exceeded"}, 400)
        refused = self.env.take_ssm_refusal(target.rpartition(".")[2]) if target else None
        if refused:
            return self._json(
                {"__type": refused, "message": "injected"}, 500 if "Internal" in refused else 400
            )
        refused_s3 = (
            None
            if target or body[:7] == b"Action="
            else self.env.s3_refusal(self.command, self.path, self.headers)
        )
        if refused_s3 is not None:
            return self._send(
                403, {"Content-Type": "application/xml"}, _s3_error(refused_s3, "Access Denied")
            )
        s3_fault = self.env.s3_fault(self.command, self.path)
        if s3_fault is not None:
            return self._send(s3_fault[0], {"Content-Type": "application/xml"}, _s3_error(s3_fault[1]))
        agent = self.env.agent
        if self.path.startswith("/snapshots") and self.env.ebs.handle(self, body):
            return None
        if body.startswith(b"Action=GetEbsDefaultKmsKeyId"):
            return self._send(200, {"Content-Type": "text/xml"}, _default_key_reply(self.env.ebs_default_key))
        if body.startswith(b"Action=GetConsoleOutput") and self.env.console is not None:
            return self._send(200, {"Content-Type": "text/xml"}, _console_reply(body, self.env.console()))
        if target == "AmazonSSM.DescribeInstanceInformation":
            request = json.loads(body or b"{}")
            ids = [v for f in request.get("Filters", []) if f["Key"] == "InstanceIds" for v in f["Values"]]
            found = agent.managed(ids or None)
            infos = [
                {
                    "InstanceId": i,
                    "PingStatus": "ConnectionLost" if i in agent.lost else "Online",
                    "PlatformType": agent.platform.get(i, "Linux"),
                }
                for i in found
            ]
            return self._json({"InstanceInformationList": infos})
        if target == "AmazonSSM.SendCommand":
            return self._send_command(json.loads(body))
        if target == "AmazonSSM.ListCommands":
            return self._json(_list_commands(agent, json.loads(body or b"{}")))
        if target == "AmazonSSM.GetCommandInvocation":
            request = json.loads(body)
            inv = agent.invocations.get((request["CommandId"], request["InstanceId"]))
            if inv is None:
                return self._json({"__type": "InvocationDoesNotExist", "message": "no such invocation"}, 400)
            return self._json(inv.to_api())
        if target == "AmazonSSM.CancelCommand":
            agent.cancel(json.loads(body)["CommandId"])
            return self._json({})
        status, headers, data = self._forward(self.command, body)
        if body.startswith(b"Action=DescribeImages") and self.env.image_fields:
            data = _patched_images(data, self.env.image_fields)
        self._send(status, headers, data)

    def _send_command(self, request: dict[str, Any]) -> None:
        env, agent = self.env, self.env.agent
        params = json.dumps(request.get("Parameters", {}), separators=(",", ":"), ensure_ascii=False)
        ids = list(request.get("InstanceIds", []))
        injected = next((env.send_faults[i] for i in ids if i in env.send_faults), None)
        if injected and injected != "ThrottlingException":
            env.asked.append(tuple(ids))
            message = f"injected for {ids}"
            return self._json({"__type": injected, "message": message}, 400)
        with env._fault_lock:
            env.asked.append(tuple(ids))
            env.send_requests += 1
            throttle = bool(env.throttle_every) and env.send_requests % env.throttle_every == 0
            throttle = throttle or injected == "ThrottlingException"
            if throttle:
                env.throttled += 1
            else:
                urls = tuple(PRESIGNED.findall(params))
                env.sent.append(SentCommand(tuple(ids), len(params.encode()), urls))
        if throttle:
            return self._json({"__type": "ThrottlingException", "message": "Rate exceeded"}, 400)
        unknown = sorted(set(ids) - set(agent.managed(ids)))
        if not ids or unknown:
            message = f"Instances {unknown} not in a valid state for account 123456789012"
            return self._json({"__type": "InvalidInstanceId", "message": message}, 400)
        command = {
            **{k: v for k, v in request.items() if k != "Targets"},
            "CommandId": str(uuid.uuid4()),
            "InstanceIds": ids,
            "RequestedDateTime": time.time(),
        }
        agent.submit(command)
        if ids[0] in env.lost_send_replies:  # SSM took it; its answer never comes back
            env.lost_send_replies.discard(ids[0])
            self.close_connection = True
            return None
        return self._json({"Command": _command_api(agent, command)})

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle


def _command_api(agent: InstanceAgent, command: dict[str, Any]) -> dict[str, Any]:
    """A command as SendCommand and ListCommands describe it."""
    keys = ("CommandId", "DocumentName", "Comment", "InstanceIds", "Parameters", "RequestedDateTime")
    keys += ("OutputS3BucketName", "OutputS3KeyPrefix", "TimeoutSeconds", "MaxConcurrency", "MaxErrors")
    return {
        **{k: command[k] for k in keys if k in command},
        "Status": agent.command_status(command["CommandId"]),
        "TargetCount": len(command["InstanceIds"]),
    }


def _list_commands(agent: InstanceAgent, request: dict[str, Any]) -> dict[str, Any]:
    """ListCommands: by id or instance, the filters SSM documents, MaxResults pages."""
    with agent.lock:
        commands = list(agent.commands.values())
    if "CommandId" in request:
        commands = [c for c in commands if c["CommandId"] == request["CommandId"]]
    if "InstanceId" in request:
        commands = [c for c in commands if request["InstanceId"] in c["InstanceIds"]]
    rows = [_command_api(agent, c) for c in commands]
    for f in request.get("Filters", []):
        key, value = f["key"], f["value"]
        if key in ("InvokedAfter", "InvokedBefore"):
            moment = datetime.fromisoformat(value).timestamp()
            after = key == "InvokedAfter"
            rows = [r for r in rows if (r["RequestedDateTime"] >= moment) == after]
        elif key == "ExecutionStage":
            rows = [r for r in rows if (r["Status"] in TERMINAL) == (value == "Complete")]
        elif key in ("Status", "DocumentName"):
            rows = [r for r in rows if r[key] == value]
    start = int(request.get("NextToken") or 0)
    size = int(request.get("MaxResults") or 50)
    reply: dict[str, Any] = {"Commands": rows[start : start + size]}
    if start + size < len(rows):
        reply["NextToken"] = str(start + size)
    return reply


def _console_reply(body: bytes, text: str) -> bytes:
    """GetConsoleOutput's answer (EC2 query protocol), the output base64-encoded as AWS sends it."""
    import base64
    import urllib.parse
    from xml.sax.saxutils import escape

    instance_id = urllib.parse.parse_qs(body.decode("latin-1")).get("InstanceId", [""])[0]
    output = base64.b64encode(text.encode("utf-8", "surrogateescape")[-65536:]).decode()
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<GetConsoleOutputResponse '
        'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>injected</requestId>'
        f"<instanceId>{escape(instance_id)}</instanceId><timestamp>2026-12-03T00:00:00.000Z</timestamp>"
        f"<output>{output}</output></GetConsoleOutputResponse>"
    ).encode()


def _patched_images(xml: bytes, fields: dict[str, dict[str, str]]) -> bytes:
    """DescribeImages' answer with the fields moto cannot set (RegisterImage drops ``Architecture``)
    replaced, or added, in the item of each image named."""
    from xml.sax.saxutils import escape

    text = xml.decode()
    for image_id, values in fields.items():
        for name, raw in values.items():
            value = escape(raw)
            field = re.compile(
                rf"(<imageId>{image_id}</imageId>(?:(?!</item>).)*?<{name}>)[^<]*(</{name}>)", re.S
            )
            if field.search(text):
                text = field.sub(rf"\g<1>{value}\g<2>", text)
            else:
                text = text.replace(
                    f"<imageId>{image_id}</imageId>",
                    f"<imageId>{image_id}</imageId><{name}>{value}</{name}>",
                )
    return text.encode()


def dry_run(form: dict[str, list[str]]) -> bool:
    """Whether an EC2 request (its form, as ``env.on_call`` gets it) is a ``DryRun``."""
    return form.get("DryRun") == ["true"]


def _default_key_reply(key: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<GetEbsDefaultKmsKeyIdResponse '
        'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>front</requestId>'
        f"<kmsKeyId>{key}</kmsKeyId></GetEbsDefaultKmsKeyIdResponse>"
    ).encode()


S3_MESSAGES = {  # what S3 says with each error code the front injects
    "InternalError": "We encountered an internal error. Please try again.",
    "SlowDown": "Please reduce your request rate.",
    "ExpiredToken": "The provided token has expired.",
    "KMS.DisabledException": "arn:aws:kms:us-east-1:123456789012:key/injected is disabled.",
    "AccessDenied": "User is not authorized to perform: kms:Decrypt on the resource associated with this "
    "ciphertext because the resource does not exist in this Region",
}


def _s3_error(code: str, message: str = "") -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
        f"<Message>{message or S3_MESSAGES.get(code, 'injected')}</Message>"
        "<RequestId>front</RequestId></Error>"
    ).encode()


def _ec2_error(code: str, message: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
        f"<Message>{message}</Message></Error></Errors><RequestID>injected</RequestID></Response>"
    ).encode()


class _FrontServer(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: a client opening more connections at once (the EBS
    # reader's 16 parallel block fetches) has SYNs dropped (ListenOverflows) and waits the 1 s TCP
    # retransmit, which AWS's endpoints do not make it wait. moto's werkzeug server listens with 128.
    request_queue_size = 128


_MOTO_PORT: list[int] = []  # the port of this process's moto server, once started
_MOTO_LOCK = threading.Lock()


def moto_server_port() -> int:
    """The port of moto's server on loopback: one per test process (an xdist worker has its own),
    started on first use and left running until the process exits (a daemon thread). moto's
    backends are process-global whatever the number of servers, so a server per environment isolated
    nothing more: each :class:`MotoEnv` resets them on entry, as it did when it started its own.
    The port is the kernel's choice at bind time (no probe-then-bind race between workers)."""
    with _MOTO_LOCK:
        if not _MOTO_PORT:
            from moto.server import ThreadedMotoServer

            server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            server.start()
            _MOTO_PORT.append(int(server.get_host_and_port()[1]))
        return _MOTO_PORT[0]


class MotoEnv:
    """moto's server (reset) and the SSM front on loopback, plus the stand-in agent; a context manager."""

    bucket = "imagelint-reports"
    profile = "imagelint-ssm"

    def __init__(self, *, managed_policies: bool = False) -> None:
        # AWS's managed IAM policies (AmazonSSMManagedInstanceCore, ...): moto loads them only when
        # asked, and that takes seconds, so only the environments that attach one ask
        self.managed_policies = managed_policies
        self.moto_port = moto_server_port()
        handler = type("Front", (_Front,), {"env": self})
        self._front = _FrontServer(("127.0.0.1", 0), handler)
        self.port = int(self._front.server_address[1])
        creds = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": REGION,
        }
        self.env = {
            **creds,
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.port}",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        self.direct_env = {**creds, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.moto_port}"}
        self.agent = InstanceAgent(self)
        self.ebs = EbsFaults()
        self._clients: dict[tuple[str, bool, str], Any] = {}
        self.not_found: dict[str, int] = {}
        self.refuse: dict[str, tuple[str, str]] = {}
        self.image_fields: dict[str, dict[str, str]] = {}  # AMI id → DescribeImages fields to answer
        self.throttle_calls: dict[str, int] = {}  # API (EC2 Action, SSM target) → throttled answers to give
        self.answered_throttled: list[str] = []
        self.group_held = 0  # DependencyViolation answers to DeleteSecurityGroup after termination
        self.profile_lag = 0  # RunInstances answered "Invalid IAM Instance Profile" (a new profile)
        self.launch_faults: dict[tuple[str, str], str] = {}  # (subnet or "*", type) → RunInstances error
        self.on_call: dict[str, Callable[[dict[str, list[str]]], None]] = {}
        self.expired_keys: set[str] = set()
        self.seen_keys: list[str] = []
        self.console: Callable[[], str] | None = None  # GetConsoleOutput's text (None: moto's sample)
        # GetEbsDefaultKmsKeyId's answer (moto does not implement it): AWS's own default until changed
        self.ebs_default_key = f"arn:aws:kms:{REGION}:123456789012:alias/aws/ebs"
        self.seen_calls: list[tuple[str, str]] = []  # (access key, Action of a query-protocol call or "")
        self.answered_not_found: list[str] = []
        self.sent: list[SentCommand] = []  # every SendCommand the front let through
        self.asked: list[tuple[str, ...]] = []  # the instance ids of every SendCommand request
        self.throttle_every = 0  # answer every n-th SendCommand with ThrottlingException (0: none)
        self.send_faults = SendFaults()  # instance id → the error every SendCommand naming it gets
        self.send_requests = 0
        self.throttled = 0
        self._fault_lock = threading.Lock()
        # instance id → (HTTP status, S3 error code) answered to every GET of that instance's bundle
        self.s3_faults: dict[str, tuple[int, str]] = {}
        self.s3_gets: list[str] = []  # the paths of the bundle GETs the front answered with a fault
        self.bundle_delete_fault: tuple[int, str] | None = None  # answered to every DELETE of a bundle
        # SSM operation → [error code, how many answers left (-1: every one)]
        self.ssm_refuse: dict[str, list[Any]] = {}
        self.lost_send_replies: set[str] = set()  # instances whose next SendCommand's reply is lost
        self.bucket_owners: dict[str, str] = {}  # bucket → its account (ExpectedBucketOwner is checked)
        self.sse_kms_required: set[str] = set()  # buckets whose policy denies uploads without SSE-KMS
        self.full_control_required: set[str] = set()  # ... without the ACL bucket-owner-full-control
        self.s3_requests: list[tuple[str, str, str | None]] = []  # (method, path, expected owner)

    def s3_refusal(self, method: str, path: str, headers: Any) -> str | None:
        """What S3 and a bucket's policy refuse, which moto does not: a request whose
        ``x-amz-expected-bucket-owner`` is not the bucket's owner (:attr:`bucket_owners`), and for the
        buckets in :attr:`sse_kms_required` / :attr:`full_control_required`, an upload without
        ``x-amz-server-side-encryption: aws:kms`` / ``x-amz-acl: bucket-owner-full-control`` (the bucket
        policies people write for a central bucket). Every request on a bucket of
        :attr:`bucket_owners` is recorded in :attr:`s3_requests` with the owner it expected."""
        bucket = path.split("?")[0].split("/")[1] if path.startswith("/") else ""
        if bucket not in self.bucket_owners:
            return None
        expected = headers.get("x-amz-expected-bucket-owner")
        self.s3_requests.append((method, path.split("?")[0], expected))
        if expected is not None and expected != self.bucket_owners[bucket]:
            return "AccessDenied"
        if method == "PUT" and "/" in path.split("?")[0].strip("/"):  # an object, not the bucket
            if bucket in self.sse_kms_required and headers.get("x-amz-server-side-encryption") != "aws:kms":
                return "AccessDenied"
            if (
                bucket in self.full_control_required
                and headers.get("x-amz-acl") != "bucket-owner-full-control"
            ):
                return "AccessDenied"
        return None

    def s3_fault(self, method: str, path: str) -> tuple[int, str] | None:
        """The injected answer to an S3 request, or None (a GET of a faulty instance's bundle, and
        :attr:`bundle_delete_fault` to a DELETE of any bundle)."""
        if method == "DELETE" and "/bundle.tar.gz" in path:
            return self.bundle_delete_fault
        if method != "GET" or "/bundle.tar.gz" not in path:
            return None
        for iid, fault in self.s3_faults.items():
            if f"/{iid}/bundle.tar.gz" in path:
                self.s3_gets.append(path)
                return fault
        return None

    def take_ssm_refusal(self, operation: str) -> str | None:
        """The error code to answer this SSM call with, or None (:attr:`ssm_refuse` counts down)."""
        with self._fault_lock:
            refusal = self.ssm_refuse.get(operation)
            if not refusal or refusal[1] == 0:
                return None
            refusal[1] -= 1 if refusal[1] > 0 else 0
            return str(refusal[0])

    def fault_for(self, authorization: str, body: bytes) -> bytes | None:
        """The EC2-style error to answer instead of forwarding, or None."""
        import re
        import urllib.parse

        key = re.search(r"Credential=([^/]+)/", authorization)
        if key:
            self.seen_keys.append(key.group(1))
            if key.group(1) in self.expired_keys:
                return _ec2_error("ExpiredToken", "The security token included in the request is expired")
        form = urllib.parse.parse_qs(body.decode("latin-1")) if body[:7] == b"Action=" else {}
        action = (form.get("Action") or [""])[0]
        if key:
            self.seen_calls.append((key.group(1), action))
        ids = [v[0] for k, v in form.items() if re.fullmatch(r"(InstanceId|VolumeId)(\.\d+)?", k)]
        if action in self.on_call:
            self.on_call[action](form)
        if action == "DeleteSecurityGroup" and self._group_held((form.get("GroupId") or [""])[0]):
            return _ec2_error("DependencyViolation", "resource has a dependent object")
        profile = (form.get("IamInstanceProfile.Name") or [""])[0]
        with self._fault_lock:
            lag = action == "RunInstances" and bool(profile) and self.profile_lag > 0
            if lag:
                self.profile_lag -= 1
        if lag:
            return _ec2_error(
                "InvalidParameterValue",
                f"Value ({profile}) for parameter iamInstanceProfile.name is invalid. "
                "Invalid IAM Instance Profile name",
            )
        launch_fault = self._launch_fault(form) if action == "RunInstances" else None
        if launch_fault:
            return _ec2_error(launch_fault, "We currently do not have sufficient capacity (injected).")
        if self.take_throttle(action):
            scope = re.search(r"Credential=[^/]+/[^/]+/[^/]+/([^/]+)/", authorization)
            ec2 = scope is None or scope.group(1) == "ec2"
            code = "RequestLimitExceeded" if ec2 else "Throttling"
            return _ec2_error(code, "Request limit exceeded." if ec2 else "Rate exceeded")
        with self._fault_lock:
            if action in self.refuse:
                return _ec2_error(*self.refuse[action])
            if ids and self.not_found.get(action, 0) > 0:
                self.not_found[action] -= 1
                self.answered_not_found.append(action)
                kind = "InvalidVolume.NotFound" if ids[0].startswith("vol-") else "InvalidInstanceID.NotFound"
                return _ec2_error(kind, f"The ID '{ids[0]}' does not exist")
        return None

    def _launch_fault(self, form: dict[str, list[str]]) -> str | None:
        """The error :attr:`launch_faults` gives this RunInstances (never to its DryRun), or None."""
        if not self.launch_faults or dry_run(form):
            return None
        subnet = (form.get("SubnetId") or form.get("NetworkInterface.1.SubnetId") or [""])[0]
        kind = (form.get("InstanceType") or [""])[0]
        return self.launch_faults.get((subnet, kind)) or self.launch_faults.get(("*", kind))

    def take_throttle(self, action: str) -> bool:
        """Whether to answer this call of ``action`` throttled (:attr:`throttle_calls` counts down)."""
        with self._fault_lock:
            if self.throttle_calls.get(action, 0) <= 0:
                return False
            self.throttle_calls[action] -= 1
            self.answered_throttled.append(action)
            return True

    def _group_held(self, group_id: str) -> bool:
        """AWS refuses to delete a group a network interface still holds: while an instance that is
        not terminated uses it, and (``group_held``) for a while after."""
        reply = self.client("ec2", direct=True).describe_instances()
        users = [
            i["State"]["Name"]
            for r in reply["Reservations"]
            for i in r["Instances"]
            if group_id in {g["GroupId"] for g in i.get("SecurityGroups", [])}
        ]
        if any(state != "terminated" for state in users):
            return True
        with self._fault_lock:
            if users and self.group_held > 0:
                self.group_held -= 1
                return True
        return False

    def __enter__(self) -> MotoEnv:
        # moto's backends are process-global: start every environment from a clean account
        if self.managed_policies:  # read when the IAM backend is made: by the reset, or the first call
            os.environ["MOTO_IAM_LOAD_MANAGED_POLICIES"] = "true"
        try:
            urllib.request.urlopen(
                urllib.request.Request(f"http://127.0.0.1:{self.moto_port}/moto-api/reset", method="POST"),
                timeout=30,
            ).close()
            self.client("iam", direct=True).list_roles()
        finally:
            os.environ.pop("MOTO_IAM_LOAD_MANAGED_POLICIES", None)
        # polled every 50 ms for shutdown (socketserver's default, 0.5 s, is a wait at every exit)
        threading.Thread(target=self._front.serve_forever, args=(0.05,), daemon=True).start()
        self.client("s3").create_bucket(Bucket=self.bucket)
        iam = self.client("iam", direct=True)
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
            ],
        }
        iam.create_role(RoleName="imagelint-ssm", AssumeRolePolicyDocument=json.dumps(trust))
        iam.create_instance_profile(InstanceProfileName=self.profile)
        iam.add_role_to_instance_profile(InstanceProfileName=self.profile, RoleName="imagelint-ssm")
        ec2 = self.client("ec2", direct=True)
        vpc = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
        igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
        ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
        main = ec2.describe_route_tables(
            Filters=[{"Name": "vpc-id", "Values": [vpc]}, {"Name": "association.main", "Values": ["true"]}]
        )["RouteTables"][0]["RouteTableId"]
        ec2.create_route(RouteTableId=main, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
        # one of moto's built-in AMIs (listing all 1300 of them takes seconds)
        param = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"
        self.image_id = self.client("ssm", direct=True).get_parameter(Name=param)["Parameter"]["Value"]
        self.agent.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.agent.stop()
        self._front.shutdown()
        self._front.server_close()

    def client(self, service: str, *, direct: bool = False, region: str = REGION) -> Any:
        key = (service, direct, region)
        if key not in self._clients:
            import boto3

            port = self.moto_port if direct else self.port
            self._clients[key] = boto3.client(
                service,
                region_name=region,
                endpoint_url=f"http://127.0.0.1:{port}",
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            )
        return self._clients[key]

    def alive(self, run_tag: str = "imagelint:run") -> dict[str, list[str]]:
        """Instances not terminated, volumes and security groups that exist, of any imagelint run."""
        ec2 = self.client("ec2")
        reply = ec2.describe_instances(Filters=[{"Name": "tag-key", "Values": [run_tag]}])
        instances = [
            i["InstanceId"]
            for r in reply["Reservations"]
            for i in r["Instances"]
            if i["State"]["Name"] not in ("terminated", "shutting-down")
        ]
        volumes = [
            v["VolumeId"]
            for v in ec2.describe_volumes(Filters=[{"Name": "tag-key", "Values": [run_tag]}])["Volumes"]
        ]
        groups = [
            g["GroupId"]
            for g in ec2.describe_security_groups(Filters=[{"Name": "tag-key", "Values": [run_tag]}])[
                "SecurityGroups"
            ]
        ]
        return {"instances": instances, "volumes": volumes, "groups": groups}

    def launched(self, run_tag: str = "imagelint:run") -> list[str]:
        """Every instance any imagelint run launched (whatever its state)."""
        reply = self.client("ec2").describe_instances(Filters=[{"Name": "tag-key", "Values": [run_tag]}])
        return [i["InstanceId"] for r in reply["Reservations"] for i in r["Instances"]]

    def sigterm_while_soaking(self, *args: str, soaking: int = 1) -> tuple[int, str]:
        """Run ``imagelint ARGS``, send it SIGTERM once ``soaking`` invocations have been running
        for a while (the instance side is really soaking), and give its exit code and stderr."""
        import sys

        exe = str(Path(sys.executable).parent / "imagelint")
        proc = subprocess.Popen(
            [exe, *args],
            env={**os.environ, **self.env},
            stderr=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            running = lambda: sum(i.status == "InProgress" for i in list(self.agent.invocations.values()))  # noqa: E731
            assert wait_for(lambda: running() == soaking, 60, every=0.1)
            time.sleep(3)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        return proc.returncode, err


def _stop_group(proc: subprocess.Popen[str], sig: signal.Signals) -> None:
    """Signal a command's whole process group (it runs in a session of its own), as an agent
    stopping a command stops what it started: the collector under the script's shell included."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
