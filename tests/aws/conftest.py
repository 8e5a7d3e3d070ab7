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


@pytest.fixture(scope="session")
def faulty_tree(debian_rootfs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the real Debian image with the sample image's faults planted (the ECS agent
    enabled without a cluster, baked machine-id and host keys, credentials, ...)."""
    from tests.aws.disk_image import plant_sample_faults
    from tests.support import copy_rootfs

    return plant_sample_faults(copy_rootfs(debian_rootfs, tmp_path_factory.mktemp("faulty") / "rootfs"))


@pytest.fixture(scope="session")
def faulty_disk(faulty_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """That tree as a GPT disk (EFI partition + ext4 root), built with sfdisk, mkfs.vfat, mke2fs -d."""
    from tests.aws.disk_image import gpt_ext4_image

    return gpt_ext4_image(faulty_tree, tmp_path_factory.mktemp("disk") / "disk.img")
