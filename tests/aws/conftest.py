"""Fixtures of the AWS tests: a fresh local AWS (moto + SSM front + stand-in agent) per test, and the
faulty sample image as the instances' root filesystem."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.aws.moto_env import MotoEnv
from tests.support import REPO, build_tree


@pytest.fixture
def moto_env() -> Iterator[MotoEnv]:
    with MotoEnv() as env:
        yield env


@pytest.fixture(scope="session")
def sample_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = yaml.safe_load((REPO / "examples" / "sample-image.yaml").read_text(encoding="utf-8"))
    return build_tree(tmp_path_factory.mktemp("sample") / "rootfs", spec["files"])
