"""Fixtures for the Packer tests: the faulty sample image, built fresh from examples/sample-image.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from imagelint.sampletree import build_image
from tests.support import REPO


@pytest.fixture(scope="session")
def sample_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled faulty sample image (enabled ecs.service, SSH host keys, cloud-init state...)."""
    spec = yaml.safe_load((REPO / "examples" / "sample-image.yaml").read_text(encoding="utf-8"))
    dest = tmp_path_factory.mktemp("sample") / "rootfs"
    build_image(dest, spec["files"])
    return dest
