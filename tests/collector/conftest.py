"""Fixtures of the collector tests."""

from tests.aws.conftest import sample_image  # noqa: F401 - the faulty sample image, shared
