"""The owner's intent on real images: ``expected-units`` and ``provided-at-launch`` decide whether a
vendor configuration missing from the image is evidence that its agent fails.

The images are the cleaned Debian cloud image (real docker.io, containerd, cloud-init) with the
vendors' agents added the way their packages install them: unit files written from the vendors'
own (the ECS agent of ecs-init, the SSM agent, the CloudWatch agent, NVIDIA's persistence daemon
and Fabric Manager), their executables present, enabled with the real ``systemctl --root``. Every
audit runs through the command line with the owner's config, as a gate would.

- an ECS-optimized-AMI-like image (ecs.service enabled at build time, /etc/ecs/ecs.config written
  by user data at launch) passes with its owner's config, and says why;
- a DLAMI-like image with the same ecs.service enabled that nobody expects is the incident (IL206
  critical, the one failing finding: IL203 and IL501 are listed as part of it), whatever
  provided-at-launch says; with ecs.service disabled it passes;
- an expected unit whose executable is missing, or whose loop the journal shows, still fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from imagelint.config import Config
from imagelint.engine import RunSettings, audit
from imagelint.rulepacks import builtin_pack_paths, load_packs
from imagelint.targets import RootfsTarget
from tests.facts.journal.exportgen import Host, write_journal
from tests.facts.systemd.crafted import systemctl, write
from tests.facts.systemd.oracle import systemctl_available
from tests.support import build_tree, copy_rootfs, need, run_cli

VENDOR = "usr/lib/systemd/system"
ECS_CONFIG = "/etc/ecs/ecs.config"
CLOUDWATCH_TOML = "/opt/aws/amazon-cloudwatch-agent/etc/amazon-cloudwatch-agent.toml"

# ecs-init's unit (amazon-ecs-init, as on Amazon Linux): exit status 5 is the agent's "terminal"
# error, which must not be restarted; every other failure restarts after 10 s, forever
ECS_UNIT = """\
[Unit]
Description=Amazon Elastic Container Service - container agent
Documentation=https://aws.amazon.com/documentation/ecs/
Requires=docker.service
After=docker.service
After=cloud-final.service

[Service]
Type=simple
Restart=on-failure
RestartPreventExitStatus=5
RestartSec=10s
EnvironmentFile=-/etc/ecs/ecs.config
ExecStartPre=/usr/libexec/amazon-ecs-init pre-start
ExecStart=/usr/libexec/amazon-ecs-init start
ExecStop=/usr/libexec/amazon-ecs-init stop
ExecStopPost=/usr/libexec/amazon-ecs-init post-stop

[Install]
WantedBy=multi-user.target
"""

# amazon-ssm-agent's unit: restarts whatever the exit, 15 minutes apart, except on 194 (reboot)
SSM_UNIT = """\
[Unit]
Description=amazon-ssm-agent
After=network-online.target

[Service]
Type=simple
WorkingDirectory=/usr/bin/
ExecStart=/usr/bin/amazon-ssm-agent
KillMode=process
Restart=always
RestartPreventExitStatus=194
RestartSec=15min

[Install]
WantedBy=multi-user.target
"""

# amazon-cloudwatch-agent's unit: runs from the TOML that `amazon-cloudwatch-agent-ctl -a
# fetch-config` writes (from a file or an SSM parameter)
CLOUDWATCH_UNIT = """\
[Unit]
Description=Amazon CloudWatch Agent
After=network.target

[Service]
Type=simple
ExecStart=/opt/aws/amazon-cloudwatch-agent/bin/start-amazon-cloudwatch-agent
KillMode=process
Restart=on-failure
RestartSec=60s

[Install]
WantedBy=multi-user.target
"""

# NVIDIA's units, each guarded by a condition on the device it serves (known only on the host)
PERSISTENCED_UNIT = """\
[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target
ConditionPathExists=/dev/nvidiactl

[Service]
Type=forking
PIDFile=/var/run/nvidia-persistenced/nvidia-persistenced.pid
Restart=always
ExecStart=/usr/bin/nvidia-persistenced --verbose
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced

[Install]
WantedBy=multi-user.target
"""
FABRICMANAGER_UNIT = """\
[Unit]
Description=NVIDIA fabric manager service
After=network-online.target
Requires=network-online.target
ConditionPathExistsGlob=/dev/nvidia-nvswitch*

[Service]
User=root
PrivateTmp=false
Type=forking
TimeoutStartSec=240
ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg
LimitCORE=infinity

[Install]
WantedBy=multi-user.target
"""

AGENTS = {  # unit -> (its file, the executables and data files its package installs)
    "ecs.service": (ECS_UNIT, ["/usr/libexec/amazon-ecs-init"]),
    "amazon-ssm-agent.service": (SSM_UNIT, ["/usr/bin/amazon-ssm-agent"]),
    "amazon-cloudwatch-agent.service": (
        CLOUDWATCH_UNIT,
        ["/opt/aws/amazon-cloudwatch-agent/bin/start-amazon-cloudwatch-agent"],
    ),
    "nvidia-persistenced.service": (PERSISTENCED_UNIT, ["/usr/bin/nvidia-persistenced"]),
    "nvidia-fabricmanager.service": (
        FABRICMANAGER_UNIT,
        ["/usr/bin/nv-fabricmanager", "/usr/share/nvidia/nvswitch/fabricmanager.cfg"],
    ),
}

ECS_AMI_UNITS = ["ecs.service", "amazon-ssm-agent.service", "amazon-cloudwatch-agent.service"]
ECS_AMI_CONFIG = f"""\
expected-units: [{", ".join(ECS_AMI_UNITS)}]
provided-at-launch:
  - {ECS_CONFIG}                                   # user data: echo ECS_CLUSTER=... >> it
  - /opt/aws/amazon-cloudwatch-agent/etc/*.toml    # user data: amazon-cloudwatch-agent-ctl -a fetch-config
"""
DLAMI_EXPECTED = ["amazon-ssm-agent.service", "nvidia-persistenced.service", "nvidia-fabricmanager.service"]
DLAMI_CONFIG = f"expected-units: [{', '.join(DLAMI_EXPECTED)}]\n"


def _install(root: Path, units: list[str], *, enable: list[str]) -> Path:
    """Install the agents' units and files as their packages do, and enable those named."""
    for name in units:
        text, files = AGENTS[name]
        write(root, f"{VENDOR}/{name}", text)
        for path in files:
            write(root, path.lstrip("/"), "#!/bin/sh\nexec sleep infinity\n").chmod(0o755)
    if enable:
        systemctl(root, "enable", *enable)
    return root


def _image(clean_cloud_rootfs: Path, where: Path, units: list[str], *, enable: list[str]) -> Path:
    need(systemctl_available(), "systemctl (used to enable the units) is not installed")
    return _install(copy_rootfs(clean_cloud_rootfs, where), units, enable=enable)


@pytest.fixture(scope="module")
def ecs_ami(clean_cloud_rootfs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built like AWS's ECS-optimized AMI: the agents enabled at build time, no /etc/ecs/ecs.config
    and no CloudWatch TOML in the image (user data writes them at launch)."""
    where = tmp_path_factory.mktemp("ecs-ami") / "img"
    return _image(clean_cloud_rootfs, where, ECS_AMI_UNITS, enable=ECS_AMI_UNITS)


@pytest.fixture(scope="module")
def dlami(clean_cloud_rootfs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A deep-learning base image: NVIDIA's units and the SSM agent enabled on purpose, the
    CloudWatch agent installed but not enabled, and the ECS agent enabled although nobody uses ECS."""
    where = tmp_path_factory.mktemp("dlami") / "img"
    enabled = ["ecs.service", *DLAMI_EXPECTED]
    return _image(clean_cloud_rootfs, where, [*enabled, "amazon-cloudwatch-agent.service"], enable=enabled)


def _audit(image: Path, config_text: str, tmp_path: Path) -> tuple[int, dict]:
    config = tmp_path / ".imagelint.yaml"
    config.write_text(config_text)
    out = tmp_path / "report.json"
    proc = run_cli("audit", str(image), "-c", str(config), "-f", f"json:{out}")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(out.read_text())


def _failing(report: dict) -> list[tuple[str, str, str]]:
    return sorted(
        (f["rule_id"], f["unit"] or f["subject"], f["severity"]) for f in report["findings"] if f["failing"]
    )


def _folded(report: dict) -> list[tuple[str, str, str]]:
    """Findings listed as part of another rule's failing finding: (rule, unit, the carrier's rule)."""
    return sorted((f["rule_id"], f["unit"], f["part_of"]) for f in report["findings"] if f.get("part_of"))


def _outcome(report: dict, rule_id: str) -> tuple[str, str]:
    (rule,) = [r for r in report["rules"] if r["rule_id"] == rule_id]
    return rule["outcome"], rule["reason"]


ECS_NOTE = f"ecs.service: {ECS_CONFIG} is provided at launch (config provided-at-launch)"
CLOUDWATCH_NOTE = (
    "amazon-cloudwatch-agent.service: /opt/aws/amazon-cloudwatch-agent/etc/*.toml is provided at launch "
    "(config provided-at-launch)"
)


def test_the_ecs_optimized_image_passes_with_its_owners_config_and_says_why(
    ecs_ami: Path, tmp_path: Path
) -> None:
    code, report = _audit(ecs_ami, ECS_AMI_CONFIG, tmp_path)
    assert code == 0 and _failing(report) == []
    assert _outcome(report, "IL501") == ("pass", ECS_NOTE)
    assert _outcome(report, "IL502") == ("pass", CLOUDWATCH_NOTE)
    assert _outcome(report, "IL206") == ("pass", f"{CLOUDWATCH_NOTE}; {ECS_NOTE}")  # in unit order
    assert f"IL501: {ECS_NOTE}" in report["notes"] and f"IL206: {CLOUDWATCH_NOTE}" in report["notes"]
    # the agents' unbounded restart policies are still reported, as the low risk they are
    assert {f["unit"] for f in report["findings"] if f["rule_id"] == "IL202"} >= set(ECS_AMI_UNITS)


def test_without_provided_at_launch_the_same_image_fails_as_before(ecs_ami: Path, tmp_path: Path) -> None:
    code, report = _audit(ecs_ami, f"expected-units: [{', '.join(ECS_AMI_UNITS)}]\n", tmp_path)
    # one failing finding per fault: each vendor rule's finding is part of its unit's loop (IL206)
    assert code == 1 and _failing(report) == [
        ("IL206", "amazon-cloudwatch-agent.service", "critical"),
        ("IL206", "ecs.service", "critical"),
    ]
    assert _folded(report) == [
        ("IL501", "ecs.service", "IL206"),
        ("IL502", "amazon-cloudwatch-agent.service", "IL206"),
    ]
    assert not any("provided at launch" in note for note in report["notes"])


def test_a_declaration_covers_only_the_files_it_names(ecs_ami: Path, tmp_path: Path) -> None:
    # /etc/* matches within one path component: it names /etc/ecs, not /etc/ecs/ecs.config
    config = (
        f"expected-units: [{', '.join(ECS_AMI_UNITS)}]\nprovided-at-launch: [/etc/*, {CLOUDWATCH_TOML}]\n"
    )
    code, report = _audit(ecs_ami, config, tmp_path)
    assert code == 1 and _failing(report) == [("IL206", "ecs.service", "critical")]
    assert _folded(report) == [("IL501", "ecs.service", "IL206")]
    assert _outcome(report, "IL502") == (
        "pass",
        f"amazon-cloudwatch-agent.service: {CLOUDWATCH_TOML} is provided at launch "
        "(config provided-at-launch)",
    )


@pytest.mark.parametrize("declared", [False, True], ids=["plain", "ecs-config-declared"])
def test_the_dlami_with_an_unexpected_ecs_agent_is_the_incident(
    dlami: Path, tmp_path: Path, declared: bool
) -> None:
    config = DLAMI_CONFIG + (f"provided-at-launch: [{ECS_CONFIG}]\n" if declared else "")
    code, report = _audit(dlami, config, tmp_path)
    # the one failing finding is the loop on ecs.service (IL206); the rules that each name one piece
    # of its evidence (IL501: no cluster; IL203: enabled, yet nobody expects it) are listed as part of it
    assert code == 1 and _failing(report) == [("IL206", "ecs.service", "critical")]
    assert _folded(report) == [("IL203", "ecs.service", "IL206"), ("IL501", "ecs.service", "IL206")]
    (loop,) = [f for f in report["findings"] if f["rule_id"] == "IL206"]
    assert "/etc/ecs/ecs.config has no ECS_CLUSTER; enabled but not expected" in loop["message"]
    assert not any("provided at launch" in note for note in report["notes"])
    # NVIDIA's Fabric Manager is reported as the reminder it is, never failing
    assert [(f["unit"], f["failing"]) for f in report["findings"] if f["rule_id"] == "IL504"] == [
        ("nvidia-fabricmanager.service", False)
    ]


def test_the_dlami_with_the_ecs_agent_disabled_passes(dlami: Path, tmp_path: Path) -> None:
    image = copy_rootfs(dlami, tmp_path / "img")
    systemctl(image, "disable", "ecs.service")
    code, report = _audit(image, DLAMI_CONFIG, tmp_path)
    assert code == 0 and _failing(report) == []
    assert _outcome(report, "IL501") == ("pass", "") and _outcome(report, "IL206") == ("pass", "")


def test_an_expected_unit_whose_executable_is_missing_still_fails(ecs_ami: Path, tmp_path: Path) -> None:
    image = copy_rootfs(ecs_ami, tmp_path / "img")
    os.unlink(image / "usr/libexec/amazon-ecs-init")
    code, report = _audit(image, ECS_AMI_CONFIG, tmp_path)
    assert code == 1 and _failing(report) == [("IL206", "ecs.service", "critical")]
    assert _folded(report) == [("IL201", "ecs.service", "IL206")]
    (loop,) = [f for f in report["findings"] if f["rule_id"] == "IL206"]
    assert "will fail (/usr/libexec/amazon-ecs-init is missing" in loop["message"]
    assert "ECS_CLUSTER" not in loop["message"]  # the configuration is not counted: it comes at launch
    assert _outcome(report, "IL206") == ("fail", f"{CLOUDWATCH_NOTE}; {ECS_NOTE}")
    assert _outcome(report, "IL501") == ("pass", ECS_NOTE)


def test_an_expected_unit_the_journal_shows_looping_still_fails(ecs_ami: Path, tmp_path: Path) -> None:
    image = copy_rootfs(ecs_ami, tmp_path / "img")
    host = Host(5)
    host.new_boot(1_764_000_000_000_000)
    export = b"".join(b for n in range(1, 13) for b in host.crash_cycle("ecs.service", "amazon-ecs-init", n))
    write_journal(export, image / "var/log/journal")
    code, report = _audit(image, ECS_AMI_CONFIG, tmp_path)
    (loop,) = [f for f in report["findings"] if f["rule_id"] == "IL206"]
    assert code == 1 and loop["unit"] == "ecs.service" and loop["failing"]
    assert "the journal shows 12 restarts in boot" in loop["message"] and "ECS_CLUSTER" not in loop["message"]


# -- each vendor-agent rule, on the example it fires on ---------------------------------------------

PACKS = load_packs([], builtin=builtin_pack_paths())
VENDOR_RULES = {  # rule -> (the unit its example enables, the file its configuration lives in)
    "IL501": ("ecs.service", ECS_CONFIG),
    "IL502": ("amazon-cloudwatch-agent.service", CLOUDWATCH_TOML),
    "IL503": ("aws-kinesis-agent.service", "/etc/aws-kinesis/agent.json"),
}


@pytest.mark.parametrize("rule_id", sorted(VENDOR_RULES))
def test_a_vendor_agent_rule_weighs_both_halves_of_the_intent(rule_id: str, tmp_path: Path) -> None:
    (rule,) = [r for p in PACKS for r in p.rules if r.id == rule_id]
    root = build_tree(tmp_path / "image", rule.example)
    unit, config_file = VENDOR_RULES[rule_id]

    def run(**intent: list[str]) -> tuple[list[str | None], str]:
        report = audit(RootfsTarget(root), PACKS, Config(select=[rule_id], **intent), RunSettings())
        (result,) = [r for r in report.rules if r.rule_id == rule_id]
        return [f.unit for f in report.findings], result.reason

    note = f"{unit}: {config_file} is provided at launch (config provided-at-launch)"
    assert run(expected_units=[unit], provided_at_launch=[config_file]) == ([], note)
    # either half alone changes nothing: an expected unit without the file, a file for a unit nobody expects
    assert run(expected_units=[unit]) == ([unit], "")
    assert run(provided_at_launch=[config_file]) == ([unit], "")
    assert run(expected_units=[unit], provided_at_launch=["/etc/other.conf"]) == ([unit], "")
