"""Poll loops ride out throttling that outlasts botocore's retries (imagelint/aws/polling.py): the
look AWS throttled is no answer, the next one comes later, and only the loop's deadline ends it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imagelint.aws.errors import AwsError
from imagelint.aws.polling import CAP, Pace
from tests.aws.moto_env import MotoEnv


def _throttled(api: str = "DescribeInstances") -> AwsError:
    return AwsError("ec2", api, "RequestLimitExceeded", "Request limit exceeded.")


def test_a_throttled_look_is_no_answer_and_the_next_one_waits_longer() -> None:
    waits: list[float] = []
    pace = Pace(0.5, sleep=waits.append)
    answers = iter([_throttled(), _throttled(), {"State": "running"}])

    def ask() -> dict[str, str]:
        answer = next(answers)
        if isinstance(answer, AwsError):
            raise answer
        return answer

    for _ in range(3):
        answer = pace.look(ask)
        if answer is None:
            pace.pause()
    assert answer == {"State": "running"} and pace.throttled == 2
    assert waits == [1.0, 2.0] and "2 look(s) throttled" in pace.note
    pace.pause()
    assert waits[-1] == 0.5  # an answer brings the pace back


def test_the_wait_is_capped_and_other_errors_end_the_loop() -> None:
    waits: list[float] = []
    pace = Pace(5.0, sleep=waits.append)

    def throttled() -> None:
        raise _throttled()

    for _ in range(10):
        assert pace.look(throttled) is None
        pace.pause()
    assert max(waits) == CAP

    def denied() -> None:
        raise AwsError("ec2", "DescribeInstances", "UnauthorizedOperation", "no")

    with pytest.raises(AwsError, match="UnauthorizedOperation"):
        pace.look(denied)


def test_a_launch_rides_out_polls_throttled_past_the_retries(
    moto_env: MotoEnv, sample_image: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """botocore's retries off (one attempt): every throttled answer reaches the loops. Once the
    instance is launched, its state, its agent and its command are each throttled three times in a
    row; the run still ends with the image's verdict, not exit 3."""
    from imagelint.aws import clients
    from imagelint.aws.ec2 import LaunchSettings
    from imagelint.commands.ami import AmiOptions, Timing, run_ami
    from imagelint.formats.outputs import OutputSpec
    from imagelint.session import RunOptions

    for key, value in moto_env.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(clients, "RETRIES", {"max_attempts": 1, "mode": "standard"})
    moto_env.agent.rootfs = sample_image
    polled = {"DescribeInstances": 3, "DescribeInstanceInformation": 3, "GetCommandInvocation": 3}
    moto_env.on_call["RunInstances"] = lambda form: moto_env.throttle_calls.update(polled)
    out = tmp_path / "r.json"
    options = AmiOptions(
        images=[moto_env.image_id],
        report_bucket=moto_env.bucket,
        launch=LaunchSettings(instance_type="t3.micro", instance_profile=moto_env.profile),
        timing=Timing(poll=0.1),
        run=RunOptions(outputs=[OutputSpec("json", out)]),
    )
    assert run_ami(options).value == "fail"
    assert json.loads(out.read_text(encoding="utf-8"))["verdict"] == "fail"
    assert sorted(moto_env.answered_throttled) == sorted(api for api, n in polled.items() for _ in range(n))
    assert moto_env.alive()["instances"] == []
    # SSM may hold the command up to its delivery window before it starts: the wait covers it
    assert [c["TimeoutSeconds"] for c in moto_env.agent.commands.values()] == [300]
    assert options.per_image_seconds() == 600 + 600 + 300 + 0 + 900
