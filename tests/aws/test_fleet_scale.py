"""`imagelint fleet` at any size: 1,000 tagged instances, a third of them not managed by SSM, SendCommand
throttled, every request recorded by the front in front of moto (:mod:`tests.aws.fleet_scale`); and
what an instance SSM does not manage does to the verdict."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import jsonschema
import pytest

from imagelint.aws.errors import Backoff
from imagelint.aws.ssm import MAX_PARAMETERS, SSM_DOCUMENT_QUOTA
from imagelint.report.schema import report_schema
from tests.aws.fleet_scale import launch, run_large_fleet
from tests.aws.moto_env import MotoEnv
from tests.support import run_cli


@pytest.mark.slow
def test_a_thousand_instances_one_command_each_throttled_and_the_unmanaged_named(
    moto_env: MotoEnv, sample_image: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in moto_env.env.items():
        monkeypatch.setenv(key, value)
    fleet = run_large_fleet(moto_env, sample_image, tmp_path, count=1000, unmanaged_every=3, throttle_every=7)
    print(fleet.figures())
    report = fleet.report
    jsonschema.validate(report, report_schema())
    assert len(fleet.tagged) == 1000 and 300 <= len(fleet.unmanaged) <= 400

    # one command per managed instance, each carrying that instance's upload URL and no other
    assert sorted(c.instance_ids for c in fleet.sent) == [(i,) for i in fleet.managed]
    for command in fleet.sent:
        (iid,) = command.instance_ids
        assert command.parameters_bytes <= MAX_PARAMETERS < SSM_DOCUMENT_QUOTA
        assert len(command.urls) == 1 and f"/{iid}/bundle.tar.gz?" in command.urls[0]
    # throttled sends were retried, and counted
    assert fleet.throttled >= len(fleet.managed) // 7
    command = report["facts"]["command"]
    assert command["throttled"] == fleet.throttled and command["commands"] == len(fleet.managed)
    assert command["max_parameter_bytes"] == max(c.parameters_bytes for c in fleet.sent)

    # a row per tagged instance; the unmanaged are named, as rows and as errors
    rows = {r["instance_id"]: r for r in report["facts"]["instances"]}
    assert sorted(rows) == fleet.tagged
    assert {i for i, r in rows.items() if r["coverage"] == "not-managed"} == fleet.unmanaged
    assert all(rows[i]["coverage"] == "checked" and rows[i]["verdict"] == "fail" for i in fleet.managed)
    named = {e["where"] for e in report["errors"] if "not managed by SSM" in e["message"]}
    assert named == fleet.unmanaged
    assert report["verdict"] == "fail" and fleet.exit_code == 1  # a fail is never hidden


def _small_fleet(env: MotoEnv, tree: Path, tmp_path: Path) -> tuple[str, list[str]]:
    from tests.collector.support import collect

    first, *rest = launch(env, "small", 3)
    env.agent.unmanaged = {first}
    env.agent.canned = collect(tree, tmp_path / "collect").read_bytes()
    return first, rest


@pytest.mark.slow
def test_an_unmanaged_instance_makes_the_run_inconclusive_unless_allowed(
    moto_env: MotoEnv, clean_rootfs: Path, tmp_path: Path
) -> None:
    unmanaged, managed = _small_fleet(moto_env, clean_rootfs, tmp_path)
    args = ["fleet", "--target", "tag:Role=small", "--report-bucket", moto_env.bucket, "--poll", "0.2s"]
    out = tmp_path / "fleet.json"
    proc = run_cli(*args, "-f", f"json:{out}", env=moto_env.env)
    assert proc.returncode == 3, proc.stderr
    report = json.loads(out.read_text())
    rows = {r["instance_id"]: r for r in report["facts"]["instances"]}
    assert rows[unmanaged]["coverage"] == "not-managed" and rows[unmanaged]["verdict"] is None
    assert "no SSM agent registered" in rows[unmanaged]["reason"]
    assert all(rows[i]["verdict"] == "pass" for i in managed)
    assert [e["where"] for e in report["errors"]] == [unmanaged]
    assert "--allow-unmanaged" in report["errors"][0]["message"]

    allowed = run_cli(*args, "--allow-unmanaged", "-f", f"json:{out}", env=moto_env.env)
    assert allowed.returncode == 0, allowed.stderr
    report = json.loads(out.read_text())
    assert report["errors"] == [] and [w["where"] for w in report["warnings"]] == [unmanaged]
    assert {r["coverage"] for r in report["facts"]["instances"]} == {"checked", "not-managed"}


@pytest.mark.slow
def test_fifty_hosts_one_refused_one_unsupported_one_throttled_one_lost_none_stops_the_fleet(
    moto_env: MotoEnv, clean_rootfs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37, item 1: each host's trouble is its own row; the others are judged, the report is
    written, and the exit code is the worst verdict (here 3: no host fails, some are errors)."""
    for key, value in moto_env.env.items():
        monkeypatch.setenv(key, value)
    hosts: dict[str, str] = {}

    def faults(tagged: list[str]) -> None:
        names = ("refused", "unsupported", "throttled", "lost", "windows", "macos")
        hosts.update(zip(names, tagged[3::7], strict=False))
        moto_env.send_faults[hosts["refused"]] = "InvalidInstanceId"
        moto_env.send_faults[hosts["unsupported"]] = "UnsupportedPlatformType"
        moto_env.send_faults[hosts["throttled"]] = "ThrottlingException"
        moto_env.agent.goes_offline = {hosts["lost"]}
        moto_env.agent.platform = {hosts["windows"]: "Windows", hosts["macos"]: "MacOS"}

    fleet = run_large_fleet(
        moto_env, clean_rootfs, tmp_path, count=50, unmanaged_every=50, throttle_every=0,
        max_concurrency="10", max_errors="10%", offline_grace=1.0, faults=faults,
    )  # fmt: skip
    print(fleet.figures())
    report = fleet.report
    jsonschema.validate(report, report_schema())
    rows = {r["instance_id"]: r for r in report["facts"]["instances"]}
    assert sorted(rows) == fleet.tagged

    def row(name: str) -> dict[str, object]:
        return rows[hosts[name]]

    assert row("refused")["coverage"] == "not-sent" and "InvalidInstanceId" in str(row("refused")["reason"])
    assert row("unsupported")["coverage"] == "not-sent"
    assert "UnsupportedPlatformType" in str(row("unsupported")["reason"])
    assert row("throttled")["coverage"] == "not-sent"
    assert "after 8 throttled attempt(s): ThrottlingException" in str(row("throttled")["reason"])
    assert row("lost")["coverage"] == "no-report" and row("lost")["status"] == "Cancelled"
    assert "went off line mid-run (PingStatus ConnectionLost" in str(row("lost")["reason"])
    for name, platform in (("windows", "Windows"), ("macos", "MacOS")):
        assert row(name)["coverage"] == "not-linux"
        assert f"not a Linux host (SSM PlatformType {platform})" in str(row(name)["reason"])
    # only Linux hosts were ever sent a command
    asked = {i for ids in moto_env.asked for i in ids}
    assert hosts["windows"] not in asked and hosts["macos"] not in asked
    assert moto_env.throttled == 8  # the throttled host's attempts; nobody else's
    # each upload URL is signed as its command is sent, to live that command's time and its send's
    # throttled retries (900 s and 7 waits of at most 0.05 s * 2^n), not the five waves of the run
    lives = {int(re.findall(r"X-Amz-Expires=(\d+)", c.urls[0])[0]) for c in moto_env.sent}
    assert lives == {math.ceil(900 + Backoff(first=0.05).longest)} == {907}

    # the rest are judged: every other managed Linux host was checked and passes
    troubled = set(hosts.values()) | fleet.unmanaged
    assert len(troubled) == 7
    assert all(
        r["coverage"] == "checked" and r["verdict"] == "pass" for i, r in rows.items() if i not in troubled
    )
    assert {e["where"] for e in report["errors"]} == troubled
    assert report["verdict"] == "inconclusive" and fleet.exit_code == 3


@pytest.mark.slow
def test_a_host_that_overwrites_another_hosts_bundle_is_caught_and_the_victim_named(
    moto_env: MotoEnv, clean_rootfs: Path, tmp_path: Path
) -> None:
    """Issue 37, item 3: a host able to write the bucket replaces another host's bundle with its own
    (carrying its own token, the only one it has): the runner reads the stored binding, refuses the
    bundle, names the host it was for, and the run is inconclusive (exit 3)."""
    from tests.collector.support import collect

    attacker, victim, bystander = launch(moto_env, "small", 3)
    moto_env.agent.canned = collect(clean_rootfs, tmp_path / "collect").read_bytes()
    moto_env.agent.overwrites = {attacker: victim}
    out = tmp_path / "fleet.json"
    proc = run_cli(
        "fleet", "--target", "tag:Role=small", "--report-bucket", moto_env.bucket, "--poll", "0.2s",
        "--max-concurrency", "3", "-f", f"json:{out}", env=moto_env.env,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    (key,) = moto_env.agent.overwritten
    assert f"/{victim}/bundle.tar.gz" in key  # the overwrite really happened
    report = json.loads(out.read_text())
    rows = {r["instance_id"]: r for r in report["facts"]["instances"]}
    assert rows[victim]["coverage"] == "no-report"
    assert f"is not bound to {victim}" in rows[victim]["reason"] and "not read" in rows[victim]["reason"]
    assert rows[attacker]["verdict"] == rows[bystander]["verdict"] == "pass"
    assert [e["where"] for e in report["errors"]] == [victim]
    assert report["verdict"] == "inconclusive"


def test_the_front_injects_only_errors_sendcommand_documents() -> None:
    from tests.aws.moto_env import SendFaults, documented_errors

    documented = documented_errors("ssm", "SendCommand")
    assert {"InvalidInstanceId", "UnsupportedPlatformType", "ThrottlingException"} <= documented
    faults = SendFaults()
    faults["i-1"] = "UnsupportedPlatformType"
    with pytest.raises(ValueError, match="does not answer"):
        faults["i-2"] = "InvalidInstanceID.NotFound"  # EC2's code, not SendCommand's
    assert faults == {"i-1": "UnsupportedPlatformType"}
