"""One faulty image, every kind of target: the same image-scope findings, verdict and inventory.

The real Debian rootfs with the sample image's faults planted (``tests/targets/disk/images.py``'s
cached tree) is opened as (a) a directory, (b) a raw GPT disk with an ext4 root, (c) that disk as
qcow2, (d) a GPT disk with an XFS root (root: a loop mount builds it), (e) an EBS snapshot of (b)
in moto, read in place through the EBS direct APIs (``audit ebs:snap-…``, and ``ami check --mode
snapshot`` of an AMI registered on it), and (f) the bundle the real collector (``collect.sh``, with
the plan ``ami``/``fleet`` send to an instance) makes of the tree. Each is audited by the CLI as a
user runs it (``imagelint audit SPEC -f json:PATH``); every kind
must report what the directory reports: the findings (rule, subject, severity, message, path, line),
each image-scope rule's outcome and reason, the counts, the verdict, the exit code, the inventory,
errors, warnings and notes. The findings' evidence is compared apart (a directory's size is the
filesystem's own).
The bundle and the snapshot also ``diff`` against the directory with no change (the disk images'
``diff`` is in ``tests/targets/disk/test_disk_images.py``).

``require-journal: true`` on this image (it keeps no journal) is inconclusive through the doors
``tests/test_session.py`` does not try: ``audit ebs:snap-…`` and ``ami check --mode snapshot``.

Booted (root, systemd-nspawn): the collector run inside the booted image (``systemctl show`` and the
boot's journal included) keeps every finding of the image and only adds live, journal and
boot-written-file findings; its image-scope findings are those of an offline audit of the same tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.support import copy_rootfs, is_root, need, run_cli
from tests.targets.disk import images

pytestmark = pytest.mark.slow

Command = tuple[str, ...]
Reports = Callable[[str], tuple[Command, dict[str, str], dict[str, Any]]]  # kind -> (command, env, report)
KINDS = ["raw-gpt-ext4", "qcow2", "gpt-xfs", "ebs-snapshot", "ami-snapshot", "bundle"]
TARGET_KIND = {
    "raw-gpt-ext4": "disk",
    "qcow2": "disk",
    "gpt-xfs": "disk",
    "ebs-snapshot": "ebs-snapshot",
    "ami-snapshot": "ami",
    "bundle": "bundle",
}


def _need_tools(*tools: str) -> None:
    for tool in tools:
        need(shutil.which(tool) is not None, f"{tool} is not installed (scripts/install.sh --test)")


@cache
def _rules() -> tuple[Any, ...]:
    """The built-in rules (what every audit here runs)."""
    from imagelint.rulepacks import builtin_pack_paths, load_packs

    return tuple(r for p in load_packs([], builtin=builtin_pack_paths()) for r in p.rules)


def _image_rules() -> frozenset[str]:
    from imagelint.rulepacks import Scope

    return frozenset(r.id for r in _rules() if Scope.IMAGE in r.scopes)


def _findings(report: dict[str, Any], rules: frozenset[str]) -> set[tuple[Any, ...]]:
    return {
        (f["rule_id"], f.get("subject") or "", f["severity"], f["message"], f.get("path"), f.get("line"))
        for f in report["findings"]
        if f["rule_id"] in rules
    }


def _outcomes(report: dict[str, Any], rules: frozenset[str]) -> dict[str, tuple[str, str]]:
    return {r["rule_id"]: (r["outcome"], r["reason"]) for r in report["rules"] if r["rule_id"] in rules}


def _judged(report: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on the kind of target."""
    rules = _image_rules()
    return {
        "findings": _findings(report, rules),
        "outcomes": _outcomes(report, rules),
        "counts": report["counts"],
        "verdict": report["verdict"],
        "exit_code": report["exit_code"],
        "inventory": json.dumps(report["inventory"], sort_keys=True),
        "errors": report["errors"],
        "warnings": report["warnings"],
        "notes": report["notes"],
    }


def _difference(got: object, want: object) -> object:
    if isinstance(got, set) and isinstance(want, set):
        return {"only here": got - want, "missing here": want - got}
    return got


def _evidence(report: dict[str, Any]) -> set[tuple[str, str, str]]:
    """Each finding's evidence. A directory's size is the filesystem's own (4096 on ext4, the
    short-form length on XFS, nothing in a tar): it is left out; every other value must agree."""

    def kept(evidence: dict[str, Any]) -> str:
        if evidence.get("type") == "directory":
            evidence = {k: v for k, v in evidence.items() if k != "size"}
        return json.dumps(evidence, sort_keys=True)

    return {(f["rule_id"], f.get("subject") or "", kept(f["evidence"])) for f in report["findings"]}


# -- the image, in every kind --------------------------------------------------------------------


@pytest.fixture(scope="module")
def tree(debian_rootfs: Path) -> Path:
    _need_tools("mke2fs", "sfdisk", "mkfs.vfat", "qemu-img")
    return images.sample_tree(debian_rootfs)


def _gpt_ext4(debian_rootfs: Path) -> Path:
    ext4 = images.ext4_fs(debian_rootfs)
    return images.cached("gpt-ext4.raw", lambda out: images.gpt(ext4, out))


def _collect(root: Path, workdir: Path) -> Path:
    """The bundle the real collector makes of ``root``, with the plan an ``ami``/``fleet`` run sends
    (the loaded rules' paths for the image, host and soak scopes, without what a boot makes under
    /run) and, as the stand-in agent does (``IL_ROOT``, ``IL_LIVE=``), ``root`` for ``/`` and no
    ``systemctl show`` of this machine."""
    from imagelint.collector import script_text
    from imagelint.collector.plan import instance_plan
    from imagelint.session import RunOptions, prepare

    plan = instance_plan(*prepare(RunOptions(outputs=[])).rules, soak_seconds=0, soak_interval=5).text()
    plan += f"root {root}\nshow 0\n"
    workdir.mkdir(parents=True)
    (workdir / "collect.sh").write_text(script_text())
    (workdir / "plan.txt").write_text(plan)
    proc = subprocess.run(
        ["sh", str(workdir / "collect.sh"), str(workdir)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def aws(tree: Path, debian_rootfs: Path) -> Iterator[tuple[Any, str, str]]:
    """moto with an EBS snapshot of the raw GPT+ext4 disk (written block by block with
    PutSnapshotBlock) and an AMI registered on it: (env, snapshot id, image id)."""
    from tests.aws.ebs_upload import register_image, upload_image
    from tests.aws.moto_env import MotoEnv

    with MotoEnv() as env:
        snapshot_id, _ = upload_image(env.client("ebs", direct=True), _gpt_ext4(debian_rootfs))
        image_id = register_image(env.client("ec2"), snapshot_id)
        yield env, snapshot_id, image_id


def _spec(kind: str, request: pytest.FixtureRequest) -> tuple[Command, dict[str, str]]:
    """(the command that audits ``kind`` of the faulty image, the environment it needs)."""
    debian_rootfs: Path = request.getfixturevalue("debian_rootfs")
    request.getfixturevalue("tree")  # the tools it needs
    if kind == "raw-gpt-ext4":
        return ("audit", str(_gpt_ext4(debian_rootfs))), {}
    if kind == "qcow2":
        raw = _gpt_ext4(debian_rootfs)
        return (
            "audit",
            str(images.cached("gpt-ext4.qcow2", lambda out: images.convert(raw, out, "qcow2"))),
        ), {}
    if kind == "gpt-xfs":
        need(is_root(), "building the XFS image needs root (a loop mount)")
        _need_tools("mkfs.xfs")
        xfs = images.xfs_fs(debian_rootfs)
        return ("audit", str(images.cached("gpt-xfs.raw", lambda out: images.gpt(xfs, out)))), {}
    if kind == "ebs-snapshot":
        env, snapshot_id, _ = request.getfixturevalue("aws")
        return ("audit", f"ebs:{snapshot_id}"), env.env
    if kind == "ami-snapshot":  # the AMI registered on that snapshot, read in place
        env, _, image_id = request.getfixturevalue("aws")
        return ("ami", "check", image_id, "--mode", "snapshot"), env.env
    assert kind == "bundle"
    return ("audit", str(request.getfixturevalue("bundle"))), {}


@pytest.fixture(scope="module")
def bundle(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _collect(tree, tmp_path_factory.mktemp("collect") / "w")


def _audit(command: Command, out: Path, *, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    proc = run_cli(*command, "-f", f"json:{out}", env=env, timeout=300)
    assert proc.returncode in (0, 1), (command, proc.stderr[-3000:])
    return proc.returncode, json.loads(out.read_text())


@pytest.fixture(scope="module")
def expected(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The directory's report: what every other kind must say."""
    code, report = _audit(("audit", str(tree)), tmp_path_factory.mktemp("dir") / "dir.json")
    assert report["target"]["kind"] == "rootfs"
    assert code == report["exit_code"] == 1, "the planted faults fail it"
    assert {"IL501", "IL101", "IL108"} <= {f["rule_id"] for f in report["findings"]}
    assert report["inventory"]["units"], "an inventory to compare"
    return report


@pytest.fixture(scope="module")
def reports(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Reports:
    """Each kind's report, audited once for the module's tests (filled in on first use)."""
    cache: dict[str, tuple[Command, dict[str, str], dict[str, Any]]] = {}
    out = tmp_path_factory.mktemp("reports")

    def report(kind: str) -> tuple[Command, dict[str, str], dict[str, Any]]:
        if kind not in cache:
            command, env = _spec(kind, request)
            code, data = _audit(command, out / f"{kind}.json", env=env)
            assert code == data["exit_code"]
            cache[kind] = (command, env, data)
        return cache[kind]

    return report


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_reports_what_the_directory_reports(
    kind: str, reports: Reports, expected: dict[str, Any]
) -> None:
    _, _, report = reports(kind)
    assert report["target"]["kind"] == TARGET_KIND[kind]  # the door meant, not a fallback
    assert report["scopes"] == expected["scopes"] == ["image"]
    want, got = _judged(expected), _judged(report)
    for key in want:
        assert got[key] == want[key], (kind, key, _difference(got[key], want[key]))


def test_the_snapshot_is_read_in_place(reports: Reports, aws: tuple[Any, str, str]) -> None:
    """The snapshot's report came from blocks fetched through GetSnapshotBlock, not a download."""
    _, _, report = reports("ebs-snapshot")
    io = report["facts"]["disk"]["io"]
    assert 0 < io["blocks_fetched"] < io["blocks_listed"] / 2
    assert report["facts"]["disk"]["root"]["filesystem"] == "ext4"


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_gives_the_same_evidence(kind: str, reports: Reports, expected: dict[str, Any]) -> None:
    """Not part of the comparison above (the findings agree without it): each finding's evidence."""
    _, _, report = reports(kind)
    got, want = _evidence(report), _evidence(expected)
    assert got == want, (kind, _difference(got, want))


@pytest.mark.parametrize("kind", ["ebs-snapshot", "bundle"])
def test_diff_against_the_directory_finds_no_change(
    kind: str, reports: Reports, tree: Path, tmp_path: Path
) -> None:
    (_, spec), env, _ = reports(kind)
    proc = run_cli("diff", str(tree), spec, "-f", f"json:{tmp_path / 'diff.json'}", env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "diff.json").read_text())
    assert result["changes"] == []
    assert result["old"]["units"] == result["new"]["units"] > 0
    assert result["old"]["packages"] == result["new"]["packages"] > 0


# -- require-journal, through the doors tests/test_session.py does not take ----------------------


def _journal_rules() -> list[str]:
    return sorted(r.id for r in _rules() if r.check.kind.startswith("journal."))


@pytest.fixture(scope="module")
def journal_configs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Configs running only the journal rules (relaxed, then requiring a journal), and one requiring
    a journal with every rule. Only the journal rules: with the image's failing findings the verdict
    is fail whatever else (``report/verdict.py``: fail before inconclusive)."""
    d = tmp_path_factory.mktemp("config")
    select = f"select: [{', '.join(_journal_rules())}]\n"
    (d / "relaxed.yaml").write_text(select)
    (d / "strict.yaml").write_text(select + "require-journal: true\n")
    (d / "all.yaml").write_text("require-journal: true\n")
    return d / "relaxed.yaml", d / "strict.yaml", d / "all.yaml"


def _no_journal(expected: dict[str, Any]) -> None:
    """The image keeps no journal (what makes require-journal inconclusive), as the directory says."""
    assert any(n.startswith("journal: no journal files found") for n in expected["notes"]), expected["notes"]
    outcomes = _outcomes(expected, frozenset(_journal_rules()))
    assert outcomes and {o for o, _ in outcomes.values()} == {"not-applicable"}


def test_require_journal_is_inconclusive_on_the_snapshot(
    reports: Reports, expected: dict[str, Any], journal_configs: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _no_journal(expected)
    relaxed, strict, every_rule = journal_configs
    (_, spec), env, _ = reports("ebs-snapshot")
    for config, code in ((relaxed, 0), (strict, 3)):
        proc = run_cli("audit", spec, "-c", str(config), "-f", "text", env=env, timeout=300)
        assert proc.returncode == code, (config.name, proc.stdout[-2000:], proc.stderr[-2000:])
    # with every rule: the planted faults fail it, and each journal rule could not run (error)
    proc = run_cli(
        "audit", spec, "-c", str(every_rule), "-f", f"json:{tmp_path / 'r.json'}", env=env, timeout=300
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    outcomes = _outcomes(json.loads((tmp_path / "r.json").read_text()), frozenset(_journal_rules()))
    assert {o for o, _ in outcomes.values()} == {"error"}
    assert all("requires a journal" in reason for _, reason in outcomes.values()), outcomes


def test_require_journal_is_inconclusive_in_ami_snapshot_mode(
    aws: tuple[Any, str, str], expected: dict[str, Any], journal_configs: tuple[Path, Path, Path]
) -> None:
    _no_journal(expected)
    env, _, image_id = aws
    relaxed, strict, _ = journal_configs
    for config, code in ((relaxed, 0), (strict, 3)):
        proc = run_cli(
            "ami", "check", image_id, "--mode", "snapshot", "-c", str(config), "-f", "text",
            env=env.env, timeout=300,
        )  # fmt: skip
        assert proc.returncode == code, (config.name, proc.stdout[-2000:], proc.stderr[-2000:])


# -- the booted image ----------------------------------------------------------------------------


def _rule_facts() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """(rules of the image scope only, of the host scope and not the image's, journal rules)."""
    from imagelint.rulepacks import Scope

    rules = _rules()
    image_only = frozenset(r.id for r in rules if set(r.scopes) == {Scope.IMAGE})
    host_only = frozenset(r.id for r in rules if Scope.HOST in r.scopes and Scope.IMAGE not in r.scopes)
    return image_only, host_only, frozenset(_journal_rules())


def _keys(report: dict[str, Any], rules: frozenset[str] | None = None) -> set[tuple[Any, ...]]:
    """Findings as (rule, subject, severity, path, line): a rule that also has the host scope words
    the live state into its message (IL206: "the running host has it activating..."), and a journal
    rule counts what the journal holds when it is read."""
    return {
        (f["rule_id"], f.get("subject") or "", f["severity"], f.get("path"), f.get("line"))
        for f in report["findings"]
        if rules is None or f["rule_id"] in rules
    }


LOOP_UNIT = "il-loop.service"
LOOP = (
    "[Unit]\nStartLimitIntervalSec=0\n[Service]\nExecStart=/bin/false\nRestart=on-failure\nRestartSec=300ms\n"
)


@pytest.fixture(scope="module")
def booted_bundle(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the tree after a boot, the bundle the collector made inside the booted image): the planted
    tree copied, booted with systemd-nspawn (its journal written into the copy; the planted
    ecs.service fails at boot: its ExecStartPre is missing, and its restart finds no docker.service),
    a runtime unit left to crash-loop six times, then the real collector run inside with ``sh``, with
    the plan an ``ami`` run sends (``systemctl show`` included), as on an instance; powered off after."""
    from imagelint.collector import script_text
    from imagelint.collector.plan import instance_plan
    from imagelint.probes.systemd import collect_live_state
    from imagelint.session import RunOptions, prepare
    from tests.nspawn import booted
    from tests.support import wait_for

    base = tmp_path_factory.mktemp("booted")
    root = copy_rootfs(tree, base / "root")
    work = root / "var/tmp/imagelint-collect"  # where the remote script's mktemp puts it
    work.mkdir(parents=True)
    (work / "collect.sh").write_text(script_text())
    (work / "plan.txt").write_text(
        instance_plan(*prepare(RunOptions(outputs=[])).rules, soak_seconds=0, soak_interval=5).text()
    )

    def restarts(prefix: list[str], name: str) -> int:
        unit = collect_live_state(prefix=prefix).units.get(name)
        return (unit.n_restarts or 0) if unit else 0

    ready = lambda p: collect_live_state(prefix=p).available  # noqa: E731
    with booted(root, volatile=False, ready=ready, timeout=120, name="-invariance") as prefix:
        # a unit crash-looping on the instance, from /run (no image file: the plan leaves /run out)
        subprocess.run(
            [*prefix, "sh", "-c", f"cat > /run/systemd/system/{LOOP_UNIT}"], input=LOOP.encode(), check=True
        )
        subprocess.run([*prefix, "systemctl", "daemon-reload"], check=True)
        subprocess.run([*prefix, "systemctl", "start", "--no-block", LOOP_UNIT], check=True)
        assert wait_for(lambda: restarts(prefix, LOOP_UNIT) >= 6, 60), f"{LOOP_UNIT} did not loop"
        proc = subprocess.run(
            [*prefix, "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
             "sh", "/var/tmp/imagelint-collect/collect.sh", "/var/tmp/imagelint-collect"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.strip().splitlines()[-1] == "/var/tmp/imagelint-collect/bundle.tar.gz"
    bundle = base / "booted.tar.gz"
    shutil.move(work / "bundle.tar.gz", bundle)
    shutil.rmtree(work)
    return root, bundle


@pytest.mark.root
def test_a_bundle_of_the_booted_image_adds_live_and_journal_findings_and_changes_no_other(
    booted_bundle: tuple[Path, Path], tree: Path, expected: dict[str, Any], tmp_path: Path
) -> None:
    after_boot, bundle = booted_bundle
    _, report = _audit(("audit", str(bundle)), tmp_path / "booted.json")
    _, offline = _audit(("audit", str(after_boot)), tmp_path / "after-boot.json")
    image_only, host_only, journal = _rule_facts()
    assert report["target"]["kind"] == "bundle" and report["scopes"] == ["image", "host"]
    assert report["errors"] == [] and offline["errors"] == []
    # nothing the image had is gone or changed (the rules without a live side word it alike)
    assert _keys(expected) <= _keys(report), _keys(expected) - _keys(report)
    assert _findings(expected, image_only) <= _findings(report, image_only)
    # what was added: the live state, the journal, or files the boot wrote
    added = _keys(report) - _keys(expected)
    live = {k for k in added if k[0] in host_only}
    from_journal = {k for k in added if k[0] in journal}
    written = {k for k in added if k[3] and not os.path.lexists(tree / k[3].lstrip("/"))}
    assert added == live | from_journal | written, added - live - from_journal - written
    assert ("IL211", LOOP_UNIT) in {k[:2] for k in live}, added  # restarting right now
    assert "ecs.service" in {k[1] for k in live}, added  # restarting or failed, by when it was asked
    journal_subjects = {(k[0], k[1].partition("@")[0]) for k in from_journal}  # UNIT@BOOT-ID
    assert {("IL301", LOOP_UNIT), ("IL303", LOOP_UNIT)} <= journal_subjects, added
    # and the image-scope findings are those of the same tree audited offline after the boot
    image = _image_rules()
    assert _keys(report, image) == _keys(offline, image)
    assert json.dumps(report["inventory"], sort_keys=True) == json.dumps(offline["inventory"], sort_keys=True)
