"""Every built-in rule fires on its example and stays quiet on a properly cleaned real image."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from imagelint.config import Config, Waiver
from imagelint.engine import RunSettings, audit
from imagelint.report import Outcome
from imagelint.rulepacks import builtin_pack_paths, load_packs
from imagelint.targets import RootfsTarget
from tests.support import build_tree

PACKS = load_packs([], builtin=builtin_pack_paths())
RULES = [r for p in PACKS for r in p.rules]
IMAGE_RULES = [r for r in RULES if "image" in r.scopes and r.example is not None]


def _run(root: Path, select: list[str], **config: object) -> tuple[dict[str, Outcome], list]:
    report = audit(RootfsTarget(root), PACKS, Config(select=select, **config), RunSettings())
    return {r.rule_id: r.outcome for r in report.rules}, report.findings


# Kinds whose subject a text tree cannot express: tested on real binary journals in tests/journal.
NEEDS_BINARY_DATA = ("journal.",)


def test_every_image_rule_has_an_example() -> None:
    missing = [
        r.id
        for r in RULES
        if "image" in r.scopes
        and r.example is None
        and r.pack != "core"
        and not r.check.kind.startswith(NEEDS_BINARY_DATA)
    ]
    assert missing == []


@pytest.mark.parametrize("rule", IMAGE_RULES, ids=lambda r: f"{r.id}-{r.name}")
def test_rule_fires_on_its_example(rule, tmp_path: Path) -> None:
    root = build_tree(tmp_path / "image", rule.example)
    outcomes, findings = _run(root, [rule.id])
    assert outcomes[rule.id] is Outcome.FAIL
    assert findings and all(f.rule_id == rule.id for f in findings)


def test_rules_stay_quiet_on_a_cleaned_real_image(clean_rootfs: Path) -> None:
    outcomes, findings = _run(clean_rootfs, [])
    assert [f"{f.rule_id} {f.location}" for f in findings] == []
    assert Outcome.ERROR not in outcomes.values()
    ran = [rid for rid, o in outcomes.items() if o is Outcome.PASS]
    assert len(ran) >= 10  # the rules really ran on it, they were not all skipped or n/a


def test_real_debootstrap_image_has_the_faults_it_is_known_for(debian_rootfs: Path) -> None:
    _, findings = _run(debian_rootfs, [])
    fired = {f.rule_id for f in findings}
    # debootstrap generates host keys and a machine id at install time, and sshd allows passwords
    assert {"IL101", "IL102", "IL103", "IL111"} <= fired


def test_expired_waiver_rule_quiet_without_expired_waivers(tmp_path: Path) -> None:
    root = build_tree(tmp_path / "image", {"/etc/hostname": "x\n"})
    future = Waiver("IL101", "ok", "cfg:1", expires=dt.date(2999, 1, 1))
    outcomes, findings = _run(root, ["IL001"], waivers=[future])
    assert outcomes["IL001"] is Outcome.PASS and findings == []


def test_secrets_are_redacted(tmp_path: Path) -> None:
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    root = build_tree(
        tmp_path / "image",
        {
            "/root/.aws/credentials": f"[default]\naws_secret_access_key = {secret}\n",
            "/etc/shadow": "root:$6$abcdefgh$SECRETHASH:20000:0:99999:7:::\n",
            "/home/u/.ssh/authorized_keys": "ssh-ed25519 AAAASECRETKEYMATERIAL u@h\n",
        },
    )
    _, findings = _run(root, ["IL107", "IL114", "IL104"])
    assert {f.rule_id for f in findings} == {"IL107", "IL114", "IL104"}
    text = repr([(f.message, f.evidence) for f in findings])
    for leaked in (secret, "SECRETHASH", "AAAASECRETKEYMATERIAL"):
        assert leaked not in text
    assert "aws_secret_access_key = <redacted>" in text


def test_sshd_first_value_wins_across_includes(tmp_path: Path) -> None:
    root = build_tree(
        tmp_path / "image",
        {
            "/etc/ssh/sshd_config": "Include /etc/ssh/sshd_config.d/*.conf\nPermitRootLogin no\n",
            "/etc/ssh/sshd_config.d/10-a.conf": "permitrootlogin=yes\n",
            "/etc/ssh/sshd_config.d/20-b.conf": "PermitRootLogin prohibit-password\n",
        },
    )
    _, findings = _run(root, ["IL110"])
    assert [(f.path, f.line, f.evidence["value"]) for f in findings] == [
        ("/etc/ssh/sshd_config.d/10-a.conf", 1, "yes")
    ]


def test_sshd_match_blocks_are_not_global(tmp_path: Path) -> None:
    root = build_tree(
        tmp_path / "image",
        {"/etc/ssh/sshd_config": "PasswordAuthentication no\nMatch User backup\n  PermitRootLogin yes\n"},
    )
    outcomes, findings = _run(root, ["IL110", "IL111"])
    assert findings == [] and outcomes["IL110"] is Outcome.PASS


def test_sshd_rules_not_applicable_without_sshd(tmp_path: Path) -> None:
    root = build_tree(tmp_path / "image", {"/etc/hostname": "x\n"})
    outcomes, _ = _run(root, ["IL110", "IL111"])
    assert outcomes == {**outcomes, "IL110": Outcome.NOT_APPLICABLE, "IL111": Outcome.NOT_APPLICABLE}


def test_world_writable_respects_sticky_and_usr_merge(tmp_path: Path) -> None:
    root = build_tree(
        tmp_path / "image",
        {
            "/usr/lib/x/tmp": {"directory": True, "mode": "1777"},
            "/usr/lib/x/bad": {"content": "", "mode": "0666"},
            "/lib": {"link": "usr/lib"},
        },
    )
    _, findings = _run(root, ["IL109"])
    assert [f.path for f in findings] == ["/usr/lib/x/bad"]  # once, not again through /lib
