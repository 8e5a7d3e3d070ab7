"""Every built-in rule fires on its example and stays quiet on a properly cleaned real image."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from imagelint.config import Config, Waiver
from imagelint.engine import RunSettings, audit
from imagelint.report import Outcome
from imagelint.rulepacks import builtin_pack_paths, load_packs
from imagelint.targets import RootfsTarget
from tests.support import build_tree, os_root, run_cli

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


QUIET_RULES = [r for r in RULES if "image" in r.scopes and r.negative_example is not None]


def test_every_rule_with_an_example_has_a_negative_example() -> None:
    assert [r.id for r in IMAGE_RULES if r.negative_example is None] == []


@pytest.mark.parametrize("rule", QUIET_RULES, ids=lambda r: f"{r.id}-{r.name}")
def test_rule_stays_quiet_on_its_negative_example(rule, tmp_path: Path) -> None:
    root = build_tree(tmp_path / "image", rule.negative_example)
    outcomes, findings = _run(root, [rule.id])
    assert findings == [] and outcomes[rule.id] is Outcome.PASS


def test_every_builtin_rule_says_since_when_and_is_stable() -> None:
    assert [r.id for r in RULES if not r.since or r.status.value != "stable"] == []


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


def _apt_cache(root: Path, n: int = 1650) -> int:
    """``n`` sparse .deb files of different sizes in /var/cache/apt/archives; returns their total size."""
    archives = root / "var/cache/apt/archives"
    (archives / "partial").mkdir(parents=True)
    total = 0
    for i in range(n):
        size = 200_000 + 997 * i
        with open(archives / f"pkg{i:04d}_1.0-{i % 7}_amd64.deb", "wb") as f:
            f.truncate(size)
        total += size
    (archives / "lock").write_bytes(b"")
    return total


def test_a_full_apt_cache_is_one_finding_with_the_true_count_and_size(tmp_path: Path) -> None:
    root = os_root(tmp_path / "image", {"/etc/hostname": "x\n"})
    total = _apt_cache(root)
    out = tmp_path / "report.json"
    proc = run_cli("audit", str(root), "--select", "IL113", "-f", f"json:{out}")
    assert proc.returncode == 0, proc.stderr  # low severity: below the default fail-on
    report = json.loads(out.read_text())
    (finding,) = report["findings"]
    (result,) = [r for r in report["rules"] if r["rule_id"] == "IL113"]
    assert report["counts"]["findings"] == result["findings"] == 1 and result["omitted"] == 0
    ev = finding["evidence"]
    assert finding["path"] == finding["subject"] == "/var/cache/apt/archives"
    assert ev["count"] == 1650 and ev["bytes"] == total == sum(
        p.stat().st_size for p in (root / "var/cache/apt/archives").glob("*.deb")
    )
    assert ev["examples"] == ["pkg0000_1.0-0_amd64.deb", "pkg0001_1.0-1_amd64.deb", "pkg0002_1.0-2_amd64.deb"]
    assert len(ev["files"]) == 1000 and ev["files_omitted"] == 650
    assert finding["message"] == (
        f"1,650 package cache file(s), {ev['bytes_text']}, in /var/cache/apt/archives, "
        "e.g. pkg0000_1.0-0_amd64.deb, pkg0001_1.0-1_amd64.deb, pkg0002_1.0-2_amd64.deb"
    )
    assert ev["bytes_text"] == "1.6 GiB"
    text = run_cli("audit", str(root), "--select", "IL113").stdout
    assert text.count("LOW IL113") == 1 and "more" not in text


@pytest.mark.parametrize(
    ("glob", "covered"),
    [("/var/cache/apt/archives", True), ("/var/cache/*", True), ("/var/cache/apt/archives/*.deb", False)],
)
def test_a_waiver_covers_a_group_when_its_glob_matches_the_directory(
    tmp_path: Path, glob: str, covered: bool
) -> None:
    root = build_tree(tmp_path / "image", {"/etc/hostname": "x\n"})
    _apt_cache(root, 5)
    waiver = Waiver("IL113", "cache kept on purpose", "cfg:1", path=glob)
    outcomes, findings = _run(root, ["IL113"], waivers=[waiver])
    assert len(findings) == 1 and (findings[0].waiver is not None) is covered
    assert outcomes["IL113"] is (Outcome.WAIVED if covered else Outcome.FAIL)


def test_rotated_journal_files_of_one_directory_are_one_finding(tmp_path: Path) -> None:
    mid = "0123456789abcdef0123456789abcdef"
    names = ["system.journal", "system@0001-0002.journal", "user-1000.journal", "system@0003.journal~"]
    root = build_tree(tmp_path / "image", {f"/var/log/journal/{mid}/{n}": "LPKSHHRH" for n in names})
    _, findings = _run(root, ["IL112"])
    (finding,) = findings
    assert finding.path == f"/var/log/journal/{mid}" and finding.evidence["count"] == 4
    assert finding.evidence["bytes"] == 32 and finding.message.startswith(
        "4 journal file(s) from the build, 32 B"
    )


def test_host_keys_and_histories_stay_one_finding_each(tmp_path: Path) -> None:
    """Each host key is its own secret and each history its own user's: they are not grouped."""
    root = build_tree(
        tmp_path / "image",
        {
            "/etc/ssh/ssh_host_rsa_key": "k\n",
            "/etc/ssh/ssh_host_ecdsa_key": "k\n",
            "/etc/ssh/ssh_host_ed25519_key": "k\n",
            "/root/.bash_history": "ls\n",
            "/root/.python_history": "1\n",
        },
    )
    _, findings = _run(root, ["IL101", "IL106"])
    assert sorted(f.path for f in findings) == [
        "/etc/ssh/ssh_host_ecdsa_key",
        "/etc/ssh/ssh_host_ed25519_key",
        "/etc/ssh/ssh_host_rsa_key",
        "/root/.bash_history",
        "/root/.python_history",
    ]
