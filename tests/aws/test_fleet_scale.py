"""`imagelint fleet` at any size: 1,000 tagged instances, a third of them not managed by SSM, SendCommand
throttled, every request recorded by the front in front of moto (:mod:`tests.aws.fleet_scale`); and
what an instance SSM does not manage does to the verdict."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

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
