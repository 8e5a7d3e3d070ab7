"""The instance side of an SSM run (``ssm.remote_script``) leaves no work directory behind.

The script runs here as AWS-RunShellScript runs it (the commands as one shell script), collecting a
small directory (``IL_ROOT``) into a work directory under ``TMPDIR``. Each way out is taken for real:
the bundle uploaded (to a local HTTP server taking the PUT), the upload refused, the wrong instance,
and the command stopped by SIGTERM to its process group while the collector soaks. After each, the
``TMPDIR`` is empty.
"""

from __future__ import annotations

import http.server
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagelint.aws import ssm
from imagelint.collector.plan import Plan

IID = "i-0123456789abcdef0"


def _plan(url: str, *, soak_seconds: float = 0.0) -> ssm.RemotePlan:
    collector = Plan((), show=False, soak_seconds=soak_seconds, soak_interval=1.0).text()
    return ssm.RemotePlan(
        run_id="r",
        bucket="bkt",
        prefix="p/",
        bucket_region="eu-west-1",
        version="0",
        collector_plan=collector,
        instance_id=IID,
        upload_url=url,
        binding="token",
    )


def _start(
    plan: ssm.RemotePlan, tmp_path: Path, *, instance: str = IID
) -> tuple[subprocess.Popen[str], Path]:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/hostname").write_text("standin\n")
    env = {
        "PATH": os.environ["PATH"],
        "TMPDIR": str(scratch),
        "IL_ROOT": str(root),
        "IL_LIVE": "",
        "AWS_SSM_INSTANCE_ID": instance,
    }
    script = "\n".join(ssm.remote_script(plan))
    proc = subprocess.Popen(
        ["sh", "-c", script],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    return proc, scratch


HEADERS: list[dict[str, str]] = []


@pytest.fixture
def bucket() -> Iterator[tuple[str, list[bytes]]]:
    """A local HTTP server that takes PUTs (as S3 takes the presigned one): its URL and the bodies
    (the headers of each PUT in :data:`HEADERS`)."""
    bodies: list[bytes] = []
    HEADERS.clear()

    class Put(http.server.BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            HEADERS.append({k.lower(): v for k, v in self.headers.items()})
            bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Put)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/bundle", bodies
    finally:
        server.shutdown()
        server.server_close()


def test_an_uploaded_bundle_leaves_no_work_directory(tmp_path: Path, bucket: tuple[str, list[bytes]]) -> None:
    url, bodies = bucket
    proc, scratch = _start(_plan(url), tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "bundle uploaded" in out and len(bodies) == 1 and bodies[0][:2] == b"\x1f\x8b"
    assert list(scratch.iterdir()) == []


def test_a_refused_upload_leaves_no_work_directory(tmp_path: Path) -> None:
    with socket.socket() as closed:  # bound, never listening: a connection is refused
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/bundle"
        proc, scratch = _start(_plan(url), tmp_path)
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 92, err
    assert "upload to s3://bkt failed" in err
    assert list(scratch.iterdir()) == []


def test_another_instance_makes_no_work_directory(tmp_path: Path) -> None:
    proc, scratch = _start(_plan("http://127.0.0.1:9/"), tmp_path, instance="i-0fffffffffffffff0")
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 95, err
    assert list(scratch.iterdir()) == []


def test_a_command_stopped_while_soaking_leaves_no_work_directory(tmp_path: Path) -> None:
    proc, scratch = _start(_plan("http://127.0.0.1:9/", soak_seconds=60), tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not any(scratch.glob("*/collect.sh")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert any(scratch.glob("*/collect.sh")), "the collector never started"
        time.sleep(2)  # well into the soak
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0
    assert list(scratch.iterdir()) == []


def test_the_upload_sends_every_header_its_url_is_signed_with(
    tmp_path: Path, bucket: tuple[str, list[bytes]]
) -> None:
    """Issue 48, item 4: a central bucket of another account that demands SSE-KMS. The URL is signed
    with the owner, SSE-KMS and ACL headers, and the script's curl sends each with its value (S3
    refuses a presigned PUT whose signed headers are missing)."""
    import dataclasses
    import urllib.parse

    import boto3
    from botocore.config import Config

    from imagelint.aws.s3urls import Presigner

    url, _bodies = bucket
    key = "arn:aws:kms:eu-west-1:111122223333:key/0f0e0d0c-0b0a-0908-0706-050403020100"
    plan = dataclasses.replace(
        _plan(url), bucket_owner="111122223333", sse_kms_key=key, owner_full_control=True
    )
    wanted = {
        "x-amz-server-side-encryption": "aws:kms",
        "x-amz-server-side-encryption-aws-kms-key-id": key,
        "x-amz-acl": "bucket-owner-full-control",
        "x-amz-expected-bucket-owner": "111122223333",
    }
    assert dict(ssm.upload_headers(plan)) == wanted
    proc, _scratch = _start(plan, tmp_path)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    (sent,) = HEADERS
    assert {k: sent.get(k) for k in wanted} == wanted and sent["x-amz-meta-imagelint-binding"] == "token"
    client = boto3.client(
        "s3",
        region_name="eu-west-1",
        aws_access_key_id="k",
        aws_secret_access_key="s",
        config=Config(signature_version="s3v4"),
    )
    signed = Presigner("bkt", "eu-west-1", client).put_url(
        "p/r/i/bundle.tar.gz", 60, {ssm.BINDING_META: "token"}, ssm.upload_params(plan)
    )
    names = urllib.parse.parse_qs(urllib.parse.urlsplit(signed).query)["X-Amz-SignedHeaders"][0]
    assert set(names.split(";")) == {"host", "x-amz-meta-imagelint-binding", *wanted}
