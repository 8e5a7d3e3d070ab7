"""The clients every AWS door uses ride out throttling: botocore's adaptive mode with ten attempts,
so a call throttled four times in a row (which the former four attempts gave up on) succeeds."""

from __future__ import annotations

import pytest

from imagelint.aws.clients import RETRIES, Clients
from tests.aws.moto_env import REGION, MotoEnv


@pytest.mark.lane  # waits out the SDK's back-offs
def test_a_call_throttled_four_times_succeeds(moto_env: MotoEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in moto_env.env.items():
        monkeypatch.setenv(name, value)
    moto_env.throttle_calls["DescribeInstances"] = 4
    answer = Clients(REGION).ec2.describe_instances()
    assert "Reservations" in answer
    assert moto_env.answered_throttled == ["DescribeInstances"] * 4
    assert RETRIES["mode"] == "adaptive" and RETRIES["max_attempts"] > 4
