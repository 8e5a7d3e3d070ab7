"""Fixtures of the AWS tests: a fresh local AWS (moto + SSM front + stand-in agent) per test, the
faulty sample image as the instances' root filesystem, and the directory audit of the faulty Debian
tree that reads of its disks and snapshots are held to; and `recorded`, every API call and request
parameters of the boto3 sessions the code makes (the policy and hardened-account tests)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from imagelint.aws.policy import ACTION_OF
from imagelint.sampletree import build_image
from tests.aws import iam_eval
from tests.aws.moto_env import MotoEnv
from tests.support import REPO, run_cli


@pytest.fixture
def moto_env() -> Iterator[MotoEnv]:
    with MotoEnv() as env:
        yield env


@pytest.fixture
def aws_env(moto_env: MotoEnv, monkeypatch: pytest.MonkeyPatch) -> MotoEnv:
    """``moto_env`` with its endpoint and credentials in this process's environment (in-process runs)."""
    for key, value in moto_env.env.items():
        monkeypatch.setenv(key, value)
    return moto_env


@pytest.fixture(scope="session")
def sample_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = yaml.safe_load((REPO / "examples" / "sample-image.yaml").read_text(encoding="utf-8"))
    return build_image(tmp_path_factory.mktemp("sample") / "rootfs", spec["files"])


def findings(report: dict[str, Any]) -> set[tuple[str, str, str]]:
    """A report's findings, to compare two reads of one image."""
    return {(f["rule_id"], f.get("subject") or "", f["message"]) for f in report["findings"]}


@pytest.fixture(scope="session")
def faulty_tree_report(faulty_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The JSON report of ``imagelint audit`` on the faulty Debian tree itself."""
    out = tmp_path_factory.mktemp("dir") / "dir.json"
    proc = run_cli("audit", str(faulty_tree), "-f", f"json:{out}", timeout=300)
    assert proc.returncode == 1, proc.stderr  # the planted faults fail it
    return dict(json.loads(out.read_text()))


class Recorder:
    def __init__(self) -> None:
        self.calls: set[str] = set()
        self.requests: list[tuple[str, dict]] = []  # (service:Operation, its parameters)
        self.lookup = lambda ids: {}  # resource id → owner and tags, as moto has them at the call
        self.scoped: list[iam_eval.Request] = []  # what IAM evaluates for the calls the policies scope
        self.signed: list[tuple[str, dict]] = []  # (the S3 action of each URL signed, its parameters)

    def __call__(self, model, **kwargs) -> None:
        prefix = model.service_model.signing_name
        api = f"{prefix}:{model.name}"
        self.calls.add(ACTION_OF.get(api, api))

    def parameters(self, params, model, **kwargs) -> None:
        api = f"{model.service_model.signing_name}:{model.name}"
        self.requests.append((api, dict(params)))
        ids = params.get(iam_eval.LOOKED_UP.get(api, ""), [])
        facts = self.lookup([ids] if isinstance(ids, str) else list(ids))
        self.scoped += iam_eval.requests_of(api, dict(params), facts)

    def made(self, api: str) -> list[dict]:
        return [params for name, params in self.requests if name == api]


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch, moto_env: MotoEnv) -> Iterator[Recorder]:
    """Every boto3 session the code makes records its API calls; every URL it signs counts as the
    S3 action the URL performs (the instance acts with the signer's permission)."""
    import boto3

    from imagelint.aws import s3urls

    for key, value in moto_env.env.items():
        monkeypatch.setenv(key, value)
    recorder = Recorder()
    recorder.lookup = lambda ids: iam_eval.resource_facts(moto_env.client("ec2", direct=True), ids)
    real = boto3.session.Session

    class Recording(real):  # type: ignore[misc,valid-type]
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.events.register("before-call", recorder)
            self.events.register("before-parameter-build", recorder.parameters)

    monkeypatch.setattr(boto3.session, "Session", Recording)
    sign = s3urls.Presigner._sign

    def signing(self, method, key, expires, metadata=None, extra=None):
        action = {"get_object": "s3:GetObject", "put_object": "s3:PutObject"}[method]
        recorder.calls.add(action)
        recorder.scoped += iam_eval.requests_of(action, {"Bucket": self.bucket, "Key": key}, {})
        recorder.signed.append((action, {"Bucket": self.bucket, "Key": key, **(extra or {})}))
        return sign(self, method, key, expires, metadata, extra)

    monkeypatch.setattr(s3urls.Presigner, "_sign", signing)
    yield recorder
