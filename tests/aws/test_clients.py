"""imagelint.aws.clients.default_region: --region wins; else the region the environment and config
name, resolved once per process for one environment and again when it changes; none is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagelint.aws import clients
from imagelint.errors import UsageError


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in clients.REGION_SOURCES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))


def test_the_region_is_resolved_once_per_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    sessions: list[int] = []
    real = clients._configured_region.__wrapped__

    def counted(environment: tuple[str | None, ...]) -> str | None:
        sessions.append(1)
        return real(environment)

    monkeypatch.setattr(clients, "_configured_region", clients.functools.lru_cache(maxsize=8)(counted))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert [clients.default_region(None) for _ in range(4)] == ["eu-west-1"] * 4
    assert len(sessions) == 1  # one session for the four specs of a diff, not four
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    assert clients.default_region(None) == "us-east-2" and len(sessions) == 2  # the environment changed
    assert clients.default_region("ap-south-1") == "ap-south-1" and len(sessions) == 2


def test_a_profiles_region_in_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config").write_text("[profile gate]\nregion = ca-central-1\n")
    monkeypatch.setenv("AWS_PROFILE", "gate")
    assert clients.default_region(None) == "ca-central-1"


def test_no_region_is_refused() -> None:
    with pytest.raises(UsageError, match="no AWS region"):
        clients.default_region(None)
