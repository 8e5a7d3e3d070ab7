"""Real daemons for the watch tests: free loopback ports, processes killed in finalizers, bounded waits."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from tests.support import need

T = TypeVar("T")
IMAGELINT = shutil.which("imagelint", path=str(Path(sys.executable).parent)) or "imagelint"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 60.0, every: float = 0.2) -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except (OSError, ValueError, KeyError, IndexError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})")


def http_get(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read().decode()


@contextmanager
def process(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``argv`` with stdout+stderr to ``log``; terminate (then kill) it on the way out."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def need_binary(name: str, package: str) -> str:
    path = shutil.which(name)
    need(path is not None, f"{name} is not installed (Debian package {package})")
    assert path is not None
    return path


@contextmanager
def prometheus(tmp: Path, targets: list[str], *, interval: str = "1s") -> Iterator[str]:
    """A real Prometheus scraping ``targets`` on a free loopback port; yields its base URL."""
    exe = need_binary("prometheus", "prometheus")
    port = free_port()
    config = tmp / "prometheus.yml"
    config.write_text(
        json.dumps(
            {
                "global": {"scrape_interval": interval, "evaluation_interval": interval},
                "scrape_configs": [{"job_name": "imagelint", "static_configs": [{"targets": targets}]}],
            }
        )
    )
    argv = [
        exe,
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    url = f"http://127.0.0.1:{port}"
    with process(argv, tmp / "prometheus.log") as proc:
        wait_for(
            "prometheus to be ready", lambda: proc.poll() is None and "Ready" in http_get(url + "/-/ready")
        )
        yield url


def query(url: str, expr: str) -> list[dict[str, Any]]:
    """Prometheus' instant query API: the result vector of ``expr``."""
    body = json.loads(http_get(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def scalar(url: str, expr: str) -> float | None:
    result = query(url, expr)
    return float(result[0]["value"][1]) if result else None


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    exe = need_binary("promtool", "prometheus")
    return subprocess.run([exe, *args], input=stdin, capture_output=True, text=True, timeout=120, check=False)
