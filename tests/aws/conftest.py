"""Fixtures of the AWS tests: a fresh local AWS (moto + SSM front + stand-in agent) per test, the
faulty sample image as the instances' root filesystem, and the directory audit of the faulty Debian
tree that reads of its disks and snapshots are held to."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.aws.moto_env import MotoEnv
from tests.support import REPO, build_tree, run_cli


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
    return build_tree(tmp_path_factory.mktemp("sample") / "rootfs", spec["files"])


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
