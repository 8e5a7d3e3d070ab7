"""`imagelint ami` against a real instance stand-in: the Debian image booted with systemd-nspawn
(real systemd as PID 1, real journald), no python3 in it, the exact SSM commands run inside it with
``sh`` (the stand-in agent of :mod:`tests.aws.moto_env` enters it with nsenter). The container shares
this machine's network, so the presigned PUT reaches moto on loopback.

The image is the minimal debootstrap tree plus curl (stock cloud images have curl; this tree is the
``instance`` flavour of ``scripts/build-test-rootfs.sh``). Faulty: the tree as debootstrap leaves it
(host keys, machine-id...) with an enabled agent that crash-loops. Clean: the same tree cleaned.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from imagelint.config import Config
from imagelint.engine import RunSettings, audit
from imagelint.probes.systemd import collect_live_state
from imagelint.rulepacks import builtin_pack_paths, load_packs
from imagelint.targets import RootfsTarget
from tests.aws.moto_env import MotoEnv
from tests.conftest import _test_image
from tests.nspawn import booted
from tests.soak.loads import KERNEL_LOAD, LOOSE, pinned, pinned_cpu
from tests.support import clean_image, copy_rootfs, run_cli

AGENT = """\
[Unit]
Description=A vendor agent that fails without its configuration
[Service]
ExecStart=/bin/sh -c 'test -s /etc/vendor/agent.conf'
Restart=always
RestartSec=2
[Install]
WantedBy=multi-user.target
"""
# Files a boot itself writes (the instance's own machine-id, journal, random seed and, on a cleaned
# image, the SSH host keys it generates at first boot): a booted instance always has them, so a
# clean image is judged without these hygiene rules (the offline audit covers them).
BOOT_ARTIFACTS = "IL101,IL102,IL112,IL115"
# The stand-in shares this machine's CPUs and sees its /proc/stat: the hot-core rules judge the test
# runner, whose kernel may be busy with a neighbour's leftovers (on CI, after the 1,000-instance fleet
# test, it was). Where a test is about the image, they are left out; the hot-core tests pin their load.
RUNNER_CPU = "IL407,IL408"


@pytest.fixture(scope="module")
def instance_image() -> Path:
    return _test_image("instance", "bookworm-instance")


def _prepare(src: Path, dest: Path, *, faulty: bool) -> Path:
    root = copy_rootfs(src, dest)
    for exe in (root / "usr/bin").glob("python3*"):
        exe.unlink()
    assert not list((root / "usr/bin").glob("python3*")) and (root / "usr/bin/curl").exists()
    if faulty:
        (root / "usr/lib/systemd/system/vendor-agent.service").write_text(AGENT)
        wants = root / "etc/systemd/system/multi-user.target.wants"
        wants.mkdir(parents=True, exist_ok=True)
        os.symlink("/lib/systemd/system/vendor-agent.service", wants / "vendor-agent.service")
    else:
        clean_image(root)  # removes the SSH host keys: the instance makes its own at first boot,
        # as Debian's cloud images do (their regenerate-ssh-host-keys unit); without that, sshd
        # fails at boot and the live and journal rules rightly say so
        dropin = root / "etc/systemd/system/ssh.service.d"
        dropin.mkdir(parents=True, exist_ok=True)
        # before Debian's own `sshd -t` check (an empty ExecStartPre= resets the list; a drop-in's
        # commands would otherwise run after it, too late)
        (dropin / "host-keys.conf").write_text(
            "[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n"
        )
    return root


def _ami(env: MotoEnv, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "ami",
        env.image_id,
        "--report-bucket",
        env.bucket,
        "--instance-profile",
        env.profile,
        "--poll",
        "0.5s",
        "--soak",
        "20s",
        "--soak-interval",
        "2s",
        "-f",
        f"json:{out}",
        *extra,
        env=env.env,
        timeout=600,
    )


def _boot(root: Path, name: str = ""):
    ready = lambda p: collect_live_state(prefix=p).available  # noqa: E731
    return booted(root, volatile=False, ready=ready, timeout=120, name=name)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.lane  # booted instances, their soak waited out
def test_faulty_instance_fails_with_the_offline_findings_plus_live_and_soak(
    moto_env: MotoEnv, instance_image: Path, tmp_path: Path
) -> None:
    root = _prepare(instance_image, tmp_path / "faulty", faulty=True)
    out = tmp_path / "report.json"
    with _boot(root) as prefix:
        moto_env.agent.container = prefix
        proc = _ami(moto_env, out)
    assert proc.returncode == 1, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    remote = {(f["rule_id"], f["subject"]) for f in report["findings"]}
    # the offline audit of the same tree (now holding the journal of that boot)
    packs = load_packs([], builtin=builtin_pack_paths())
    offline = audit(RootfsTarget(root), packs, Config(), RunSettings())
    image_rules = {r.id for p in packs for r in p.rules if "image" in r.scopes}
    assert {k for k in remote if k[0] in image_rules} == {(f.rule_id, f.subject) for f in offline.findings}
    assert ("IL211", "vendor-agent.service") in remote  # live: restarting right now
    assert ("IL405", "vendor-agent.service") in remote  # soak: restarted during the window
    assert ("IL206", "vendor-agent.service") in remote  # the combination, with the live evidence
    assert report["facts"]["audit"]["target"]["kind"] == "bundle"
    assert moto_env.alive() == {"instances": [], "volumes": [], "groups": []}
    _assert_restarts_agree(report, "vendor-agent.service")
    soak = report["facts"]["soak"]["soak"]  # the symptoms were measured on the instance, as locally
    assert soak["cpu"]["reads"] >= 50 and len(soak["memory_stat_walk"]["series"]["times"]) >= 3, soak["cpu"]
    outcomes = {r["rule_id"]: r["outcome"] for r in report["rules"]}
    assert outcomes["IL407"] in ("pass", "fail") and outcomes["IL408"] in ("pass", "fail")  # judged remotely


def _assert_restarts_agree(report: dict, unit: str) -> None:
    """IL211's count is the state at the end of the soak, and the journal of the same boot agrees: over
    the soak's window it logged the restarts the manager counted (within the one that may fall on a
    boundary), and in all never fewer than the end count (the files are collected after the soak, so
    the loop goes on restarting while they are)."""
    [live] = [f for f in report["findings"] if (f["rule_id"], f["subject"]) == ("IL211", unit)]
    soak = report["facts"]["soak"]["soak"]
    start, end = (
        [u["n_restarts"] for u in soak["restarts"][m]["units"] if u["unit"] == unit] for m in ("start", "end")
    )
    [logged] = [
        f for f in report["findings"] if (f["rule_id"], f["subject"].split("@")[0]) == ("IL301", unit)
    ]
    assert live["evidence"]["n_restarts"] == end[0] >= 5, (live["evidence"], end)
    assert abs(soak["journal_restarts"][unit] - (end[0] - start[0])) <= 1, (
        soak["journal_restarts"],
        start,
        end,
    )
    assert logged["evidence"]["restarts"] >= end[0], (logged["evidence"], end)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.serial
def test_a_kernel_load_on_one_host_cpu_is_a_hot_core_in_the_remote_soak(
    moto_env: MotoEnv, instance_image: Path, tmp_path: Path
) -> None:
    """The container sees the host's /proc/stat: a kernel-time load pinned to one host CPU during the
    remote soak is named by the bundle's soak report, as the local soak names it."""
    cpu = pinned_cpu()
    root = _prepare(instance_image, tmp_path / "faulty", faulty=True)
    config = tmp_path / "imagelint.yaml"
    config.write_text(json.dumps({"parameters": {"IL407": {**LOOSE, "evidence": {}}}}))
    out = tmp_path / "report.json"
    with _boot(root) as prefix, pinned(KERNEL_LOAD, cpu):
        moto_env.agent.container = prefix
        proc = _ami(moto_env, out, "-c", str(config))
    assert proc.returncode == 1, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    [finding] = [f for f in report["findings"] if f["rule_id"] == "IL407"]
    assert f"cpu{cpu}" in finding["evidence"]["cpus"].split(", "), finding["evidence"]
    assert f"cpu{cpu}" in finding["message"] and "memory.stat walk" in finding["message"]


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.lane  # booted instances, their soak waited out
def test_clean_instance_passes(moto_env: MotoEnv, instance_image: Path, tmp_path: Path) -> None:
    root = _prepare(instance_image, tmp_path / "clean", faulty=False)
    out = tmp_path / "report.json"
    with _boot(root) as prefix:
        moto_env.agent.container = prefix
        proc = _ami(moto_env, out, "--ignore", f"{BOOT_ARTIFACTS},{RUNNER_CPU}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["verdict"] == "pass" and not report["findings"]
    ran = {r["rule_id"] for r in report["rules"] if r["outcome"] == "pass"}
    assert {"IL211", "IL212", "IL401", "IL405"} <= ran  # the live and soak rules did run


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.lane  # booted instances, their soak waited out
def test_fleet_of_a_faulty_and_a_clean_instance_gives_a_row_each(
    moto_env: MotoEnv, instance_image: Path, tmp_path: Path
) -> None:
    faulty_root = _prepare(instance_image, tmp_path / "faulty", faulty=True)
    clean_root = _prepare(instance_image, tmp_path / "clean", faulty=False)
    # both containers share this machine's network: the clean one's sshd listens elsewhere, or the
    # second sshd to start would fail on port 22 (a stand-in artefact: instances have their own)
    (clean_root / "etc/ssh/sshd_config.d/port.conf").write_text("Port 2222\n")
    tags = [{"ResourceType": "instance", "Tags": [{"Key": "Role", "Value": "gpu"}]}]
    reply = moto_env.client("ec2").run_instances(
        ImageId=moto_env.image_id, MinCount=2, MaxCount=2, TagSpecifications=tags
    )
    faulty, clean = sorted(i["InstanceId"] for i in reply["Instances"])
    out = tmp_path / "fleet.json"
    with _boot(faulty_root, "-faulty") as faulty_prefix, _boot(clean_root, "-clean") as clean_prefix:
        moto_env.agent.container_for = {faulty: faulty_prefix, clean: clean_prefix}
        proc = run_cli(
            "fleet", "--target", "tag:Role=gpu", "--report-bucket", moto_env.bucket, "--poll", "0.5s",
            "--soak", "20s", "--soak-interval", "2s", "--ignore", f"{BOOT_ARTIFACTS},{RUNNER_CPU}",
            "-f", f"json:{out}",
            env=moto_env.env, timeout=600,
        )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    rows = {r["instance_id"]: r["verdict"] for r in report["facts"]["instances"]}
    assert rows == {faulty: "fail", clean: "pass"}
    by_instance = {(f["evidence"]["instance_id"], f["rule_id"], f["subject"]) for f in report["findings"]}
    assert {i for i, _, _ in by_instance} == {faulty}  # the clean instance has no finding
    for rule in ("IL211", "IL405", "IL206"):  # live, soak and the combination, on the real systemd
        assert (faulty, rule, f"{faulty}: vendor-agent.service") in by_instance
