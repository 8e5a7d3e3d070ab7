"""The systemd check kinds and rules on crafted trees (links made by real ``systemctl --root enable``),
firing and quiet, plus time spans and bad input."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from imagelint.config import Config
from imagelint.engine import RunSettings, audit
from imagelint.facts.systemd.timespan import format_seconds, parse_timespan
from imagelint.report import Outcome
from imagelint.rulepacks import builtin_pack_paths, load_packs
from imagelint.targets import RootfsTarget
from tests.facts.systemd import crafted
from tests.facts.systemd.crafted import VENDOR, systemctl, write
from tests.facts.systemd.oracle import systemctl_available
from tests.support import need

PACKS = load_packs([], builtin=builtin_pack_paths())


def run(root: Path, select: list[str], **config: object) -> tuple[dict[str, Outcome], list]:
    report = audit(RootfsTarget(root), PACKS, Config(select=select, **config), RunSettings())
    errors = [e for e in report.errors]
    assert not errors, errors
    return {r.rule_id: r.outcome for r in report.rules}, report.findings


def exe(root: Path, rel: str) -> None:
    path = write(root, rel, "#!/bin/sh\nexit 0\n")
    path.chmod(0o755)


@pytest.fixture
def image(tmp_path: Path) -> Path:
    need(systemctl_available(), "systemctl (used to build the trees) is not installed")
    root = crafted.skeleton(tmp_path / "root")
    exe(root, "usr/bin/true")
    return root


def service(root: Path, name: str, body: str, *, unit_section: str = "", enable: bool = True) -> None:
    text = f"[Unit]\nDescription={name}\n{unit_section}\n[Service]\n{body}\n"
    text += "[Install]\nWantedBy=multi-user.target\n"
    write(root, f"{VENDOR}/{name}", text)
    if enable:
        systemctl(root, "enable", name)


# -- time spans -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10", 10),
        ("10s", 10),
        ("1min 30s", 90),
        ("1min30s", 90),
        ("500ms", 0.5),
        ("1.5h", 5400),
        ("2d", 172800),
        (" 100 ms ", 0.1),
        ("5us", 5e-6),
        ("infinity", math.inf),
    ],
)
def test_timespans(text: str, seconds: float) -> None:
    assert parse_timespan(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "ten", "10 parsecs", "-5s", "1min x"])
def test_bad_timespans(text: str) -> None:
    with pytest.raises(ValueError):
        parse_timespan(text)


def test_format_seconds() -> None:
    assert [format_seconds(s) for s in (0.1, 10, 90, 3600, math.inf)] == [
        "100ms",
        "10s",
        "1min 30s",
        "1h",
        "infinity",
    ]


# -- IL201 exec missing ----------------------------------------------------------------------------


def test_exec_missing_fires_and_honours_prefixes_search_path_and_conditions(image: Path) -> None:
    exe(image, "usr/sbin/present-daemon")
    service(image, "gone.service", "ExecStartPre=/usr/bin/true\nExecStart=/opt/agent/bin/agent --run")
    service(image, "ignored.service", "ExecStart=/usr/bin/true\nExecStartPre=-/opt/nothing")
    service(image, "bare.service", "ExecStart=present-daemon --flag\nExecStop=absent-tool stop")
    service(image, "argv0.service", "ExecStart=@/usr/bin/true fake-name\nExecReload=+!!/opt/reload")
    service(image, "cond.service", "ExecStart=/opt/x", unit_section="ConditionPathExists=/etc/x.conf")
    service(image, "negcond.service", "ExecStart=/opt/y", unit_section="ConditionPathExists=!/etc/hostname")
    write(image, "etc/hostname", "h\n")
    service(
        image,
        "trig.service",
        "ExecStart=/opt/z",
        unit_section="ConditionPathExists=|/etc/a\nConditionPathIsDirectory=|/etc/b",
    )
    service(
        image,
        "trig-one.service",
        "ExecStart=/opt/w",
        unit_section="ConditionPathExists=|/etc/a\nConditionPathExists=|/etc/hostname",
    )
    service(image, "runtime.service", "ExecStart=/opt/v", unit_section="ConditionPathExists=/run/flag")
    service(image, "envfile.service", "ExecStart=/usr/bin/true\nEnvironmentFile=/etc/default/envfile")
    service(image, "envopt.service", "ExecStart=/usr/bin/true\nEnvironmentFile=-/etc/default/envopt")
    service(image, "disabled.service", "ExecStart=/opt/never", enable=False)
    write(image, "usr/bin/noexec", "data")
    service(image, "noexec.service", "ExecStart=/usr/bin/noexec")
    service(
        image,
        "reset.service",
        "ExecStart=/opt/u",
        unit_section="ConditionPathExists=/etc/a\nConditionPathExists=",
    )

    _, findings = run(image, ["IL201"])
    got = {f.unit: f for f in findings}
    assert set(got) == {
        "gone.service",
        "bare.service",
        "argv0.service",
        "trig-one.service",
        "runtime.service",
        "envfile.service",
        "noexec.service",
        "reset.service",
    }
    gone = got["gone.service"]
    assert gone.path == f"/{VENDOR}/gone.service" and gone.line == 6  # the ExecStart= line
    assert "/opt/agent/bin/agent is missing (ExecStart= line 6)" in gone.message
    assert "default.target → graphical.target → multi-user.target → gone.service" in gone.message
    assert "absent-tool is missing (ExecStop=" in got["bare.service"].message
    assert "present-daemon" not in got["bare.service"].message  # found in /usr/sbin by the search path
    assert "/opt/reload is missing (ExecReload=" in got["argv0.service"].message
    assert "/etc/default/envfile is missing" in got["envfile.service"].message
    assert "not executable" in got["noexec.service"].message


def test_exec_missing_can_include_ignored_commands(image: Path) -> None:
    from imagelint.checks import CheckContext
    from imagelint.checks.systemd import ExecMissing, ExecMissingParams

    service(image, "ignored.service", "ExecStart=/usr/bin/true\nExecStartPre=-/opt/nothing")
    ctx = CheckContext.for_target(RootfsTarget(image))
    assert ExecMissing().evaluate(ctx, ExecMissingParams()) == []
    [obs] = ExecMissing().evaluate(ctx, ExecMissingParams(include_ignored=True))
    assert "failure ignored" in obs.evidence["missing"]


# -- IL202 unbounded restart -------------------------------------------------------------------------


def test_restart_unbounded_against_unit_and_system_conf_values(image: Path) -> None:
    service(image, "ten.service", "ExecStart=/usr/bin/true\nRestart=on-failure\nRestartSec=10")
    service(image, "fast.service", "ExecStart=/usr/bin/true\nRestart=always\nRestartSec=1")
    service(image, "default.service", "ExecStart=/usr/bin/true\nRestart=on-failure")
    service(image, "no.service", "ExecStart=/usr/bin/true\nRestart=no\nRestartSec=30")
    service(
        image,
        "nolimit.service",
        "ExecStart=/usr/bin/true\nRestart=always",
        unit_section="StartLimitIntervalSec=0",
    )
    service(
        image,
        "tuned.service",
        "ExecStart=/usr/bin/true\nRestart=on-failure\nRestartSec=10",
        unit_section="StartLimitIntervalSec=5min\nStartLimitBurst=5",
    )
    service(image, "edge.service", "ExecStart=/usr/bin/true\nRestart=always\nRestartSec=2")  # 5×2s = 10s
    service(image, "off.service", "ExecStart=/usr/bin/true\nRestart=always\nRestartSec=10", enable=False)
    _, findings = run(image, ["IL202"])
    got = {f.unit: f for f in findings}
    assert set(got) == {"ten.service", "nolimit.service", "edge.service"}
    ten = got["ten.service"]
    assert (ten.path, ten.line) == (f"/{VENDOR}/ten.service", 6)  # the Restart= line
    assert ten.evidence["restarts_per_day"] == "8,640"
    assert "5 starts in 10s" in ten.message and "never failed" in ten.message
    assert "disables the start limit" in got["nolimit.service"].evidence["why"]

    # the image's manager defaults change the verdict: a long interval makes ten.service trip ...
    write(image, "etc/systemd/system.conf", "[Manager]\nDefaultStartLimitIntervalSec=5min\n")
    _, findings = run(image, ["IL202"])
    assert {f.unit for f in findings} == {"nolimit.service"}
    # ... and a drop-in read after it, with a slow default restart, makes default.service loop
    write(
        image, "usr/lib/systemd/system.conf.d/50-slow.conf", "[Manager]\nDefaultStartLimitIntervalSec=20s\n"
    )
    write(image, "etc/systemd/system.conf.d/90-restart.conf", "[Manager]\nDefaultRestartSec=30s\n")
    _, findings = run(image, ["IL202"])
    got = {f.unit: f for f in findings}
    assert set(got) == {"nolimit.service", "default.service", "ten.service"}
    assert "/etc/systemd/system.conf.d/90-restart.conf:2" in got["default.service"].evidence["restart_sec"]
    assert got["default.service"].evidence["restarts_per_day"] == "2,880"


# -- IL203 unexpected enabled unit ---------------------------------------------------------------------


def test_unexpected_enabled_unit(image: Path) -> None:
    service(image, "by-hand.service", "ExecStart=/usr/bin/true")
    service(image, "expected.service", "ExecStart=/usr/bin/true")
    service(image, "preset.service", "ExecStart=/usr/bin/true")
    service(image, "packaged.service", "ExecStart=/usr/bin/true")
    write(image, "usr/lib/systemd/system-preset/50-image.preset", "enable preset.service\ndisable *\n")
    write(image, "var/lib/systemd/deb-systemd-helper-enabled/packaged.service.dsh-also", "")
    # static, pulled in by another unit: not "enabled" by anyone
    write(image, f"{VENDOR}/dep.service", "[Service]\nExecStart=/usr/bin/true\n")
    service(image, "puller.service", "ExecStart=/usr/bin/true", unit_section="Wants=dep.service")
    _, findings = run(image, ["IL203"], expected_units=["expected.*", "puller.service"])
    got = {f.unit: f for f in findings}
    assert set(got) == {"by-hand.service"}
    f = got["by-hand.service"]
    assert f.path == "/etc/systemd/system/multi-user.target.wants/by-hand.service"
    assert "disabled by /usr/lib/systemd/system-preset/50-image.preset:2" in f.message

    # without expected-units the presets and package records alone decide
    _, findings = run(image, ["IL203"])
    assert {f.unit for f in findings} == {"by-hand.service", "expected.service", "puller.service"}


# -- IL204 broken units -------------------------------------------------------------------------------


def test_broken_units(image: Path) -> None:
    write(image, f"{VENDOR}/typo.service", "[Unit]\nDescription=x\n[Serivce]\nExecStart=/usr/bin/true\n")
    write(image, f"{VENDOR}/nostart.service", "[Service]\nType=simple\nExecStop=/usr/bin/true\n")
    write(image, f"{VENDOR}/oneshot.service", "[Service]\nType=oneshot\nExecStart=/usr/bin/true\n")
    write(
        image, f"{VENDOR}/twostarts.service", "[Service]\nExecStart=/usr/bin/true\nExecStart=/usr/bin/true\n"
    )
    write(
        image,
        f"{VENDOR}/deps.service",
        "[Unit]\nRequires=nothere.service data.mount\nBindsTo=gone.socket\nWants=optional.service\n"
        "[Service]\nExecStart=/usr/bin/true\n",
    )
    write(image, f"{VENDOR}/xsec.service", "[Service]\nExecStart=/usr/bin/true\n[X-Vendor]\nFoo=bar\n")
    _, findings = run(image, ["IL204", "IL207"])
    assert {f.rule_id for f in findings} == {"IL207"}  # none is started at boot: info, not medium
    got = sorted((f.unit, f.line or 0, f.evidence["problem"]) for f in findings)
    assert got == [
        ("deps.service", 2, "Requires=nothere.service, but no unit file defines nothere.service"),
        ("deps.service", 3, "BindsTo=gone.socket, but no unit file defines gone.socket"),
        ("nostart.service", 0, "Type=simple without ExecStart=; systemd refuses to load it"),
        ("twostarts.service", 3, "more than one ExecStart= for Type=simple; refused"),
        ("typo.service", 0, "no ExecStart=, ExecStop= or SuccessAction=; systemd refuses to load it"),
        ("typo.service", 4, "unknown section [Serivce]; systemd ignores its settings"),
    ]


def test_broken_units_agree_with_systemd_analyze_verify(image: Path) -> None:
    """What IL204 says systemd refuses, systemd-analyze verify refuses too (and accepts the rest)."""
    import shutil
    import subprocess

    need(shutil.which("systemd-analyze") is not None, "systemd-analyze is not installed")
    write(image, f"{VENDOR}/nostart.service", "[Service]\nType=simple\nExecStop=/usr/bin/true\n")
    write(image, f"{VENDOR}/fine.service", "[Service]\nType=oneshot\nExecStart=/usr/bin/true\n")

    def verify(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["systemd-analyze", f"--root={image}", "verify", "--man=no", name],
            capture_output=True,
            text=True,
            check=False,
        )

    bad = verify("nostart.service")
    assert bad.returncode != 0 and "ExecStart=" in bad.stderr
    assert "ExecStart" not in verify("fine.service").stderr
    _, findings = run(image, ["IL204", "IL207"])
    assert {f.unit for f in findings} == {"nostart.service"}


# -- bad input --------------------------------------------------------------------------------------


def test_bad_input_gives_findings_never_a_traceback(tmp_path: Path) -> None:
    need(systemctl_available(), "systemctl (used to build the tree) is not installed")
    root = crafted.bad_tree(tmp_path / "bad")
    exe(root, "bin/true")
    packs_rules = [r.id for p in PACKS for r in p.rules if p.name in ("systemd", "aws")]
    outcomes, findings = run(root, packs_rules)
    assert Outcome.ERROR not in outcomes.values()
    where = {f.path: f.evidence.get("problem", "") for f in findings if f.rule_id == "IL204"}
    assert "symlink loop" in where["/etc/systemd/system/loop.service"]
    assert "not valid UTF-8" in where["/usr/lib/systemd/system/garbage.service"]
    assert "read limit" in where["/usr/lib/systemd/system/big.service"]
    assert "no unit file defines" in where["/etc/systemd/system/multi-user.target.wants/ghost.service"]
    # the rest of the image is still audited: ok.service is enabled by hand and reported as such
    assert "ok.service" in {f.unit for f in findings if f.rule_id == "IL203"}


def test_unit_rules_not_applicable_without_units(tmp_path: Path) -> None:
    from tests.support import build_tree

    root = build_tree(tmp_path / "image", {"/etc/hostname": "x\n"})
    selected = ["IL201", "IL202", "IL203", "IL204", "IL205", "IL501"]
    outcomes, findings = run(root, selected)
    assert findings == []
    assert {outcomes[r] for r in selected} == {Outcome.NOT_APPLICABLE}


def test_live_rules_not_applicable_offline(image: Path) -> None:
    outcomes, _ = run(image, ["IL211", "IL212"])
    assert outcomes["IL211"] is outcomes["IL212"] is Outcome.SKIPPED  # host scope is not part of an image run
