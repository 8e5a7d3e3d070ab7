"""`imagelint diff ebs:snap-OLD ebs:snap-NEW` end to end against moto: NEW read through ListChangedBlocks.

A small tree (the sample image, a dpkg status file, a vendor agent's unit and binary) is made into a
GPT disk (EFI + ext4); a vendor update (the agent enabled at boot, its package added) is applied to
a copy of the disk in place with ``debugfs -w``, so that the blocks it did not touch are identical.
OLD is uploaded, NEW as its child (``ParentSnapshotId``), and the same NEW image once more without a
parent (another lineage). The CLI (a subprocess) must then name exactly the update, fetch from NEW
only blocks ListChangedBlocks names (at most 1.2 times the changed blocks its walk needs, counted by
the server), and give the same changes as a full read of the same pair, as the diff of the two disk
image files, and as the fallbacks (access denied, unrelated snapshots, a listing that disagrees with
the snapshots' own), which say why they read NEW in full. With the audit cache on, the next diff of
the same snapshots reads neither of them again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from botocore.exceptions import ClientError
from botocore.validate import ParamValidator

from imagelint.diff.schema import diff_schema
from imagelint.sampletree import build_image
from tests.aws.disk_image import PACKAGE, UNIT, VENDOR_FILES, gpt_ext4_image, vendor_update
from tests.aws.ebs_upload import register_image, upload_image
from tests.aws.moto_env import REGION, MotoEnv
from tests.aws.snapshot_streams import blocks_read, differing
from tests.support import REPO, run_cli

pytestmark = pytest.mark.slow

BLOCK = 524288
STATUS = (
    "Package: base-files\nStatus: install ok installed\nArchitecture: amd64\nVersion: 12.4\n\n"
    "Package: systemd\nStatus: install ok installed\nArchitecture: amd64\nVersion: 252.33-1\n\n"
)


@dataclass
class Pair:
    env: MotoEnv
    old: str
    new: str
    other: str  # NEW's image again, of another lineage
    disks: tuple[Path, Path]
    changed: set[int]  # the blocks in which the two disk images differ
    walk: set[int]  # the blocks an audit of NEW's disk reads


def vendor_disks(work: Path) -> tuple[Path, Path]:
    import yaml

    spec = yaml.safe_load((REPO / "examples" / "sample-image.yaml").read_text(encoding="utf-8"))
    tree = build_image(work / "rootfs", {**spec["files"], "/var/lib/dpkg/status": STATUS, **VENDOR_FILES})
    old = gpt_ext4_image(tree, work / "old.img")
    return old, vendor_update(old, work / "new.img", tree, work)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    old_disk, new_disk = vendor_disks(tmp_path_factory.mktemp("vendor"))
    with MotoEnv() as env:
        ebs = env.client("ebs", direct=True)
        old, _ = upload_image(ebs, old_disk)
        env.ebs.parents[old] = None  # uploaded around the front: its lineage is its own
        new, _ = upload_image(
            env.client("ebs"), new_disk, parent=old
        )  # through the front: it notes the parent
        other, _ = upload_image(env.client("ebs"), new_disk)
        changed = differing(old_disk, new_disk)
        yield Pair(env, old, new, other, (old_disk, new_disk), changed, blocks_read(new_disk))


@pytest.fixture
def env(pair: Pair) -> Iterator[MotoEnv]:
    pair.env.ebs.reset()
    yield pair.env
    pair.env.ebs.reset()


def diff(
    env: MotoEnv, old: str, new: str, out: Path, cache: Path | None = None, code: int = 1
) -> tuple[dict[str, Any], str]:
    """The CLI's diff (the audit cache off, or in ``cache``); ``code``: its exit code (a new boot
    unit fails the diff by default)."""
    kept = (
        {"IMAGELINT_NO_CACHE": "1"}
        if cache is None
        else {"IMAGELINT_NO_CACHE": "", "XDG_CACHE_HOME": str(cache)}
    )
    proc = run_cli("diff", old, new, "-f", f"json:{out}", env={**env.env, **kept}, timeout=300)
    assert proc.returncode == code, proc.stderr
    result = json.loads(out.read_text())
    jsonschema.validate(result, diff_schema())
    return result, proc.stderr


def changes(result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [(c["kind"], c["action"], c["subject"], c["detail"]) for c in result["changes"]]


@pytest.fixture(scope="module")
def incremental(
    pair: Pair, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], list[int], str]:
    """The incremental diff of the pair, and the blocks the server served for NEW."""
    pair.env.ebs.reset()
    out = tmp_path_factory.mktemp("incremental") / "diff.json"
    result, err = diff(pair.env, f"ebs:{pair.old}", f"ebs:{pair.new}", out)
    served = [i for s, i in pair.env.ebs.snapshot_gets if s == pair.new]
    return result, served, err


def test_the_incremental_diff_names_the_update_and_fetches_only_changed_blocks(
    pair: Pair, incremental: tuple[dict[str, Any], list[int], str]
) -> None:
    result, served, err = incremental
    assert {(c["kind"], c["subject"]) for c in result["changes"]} >= {
        ("new-boot-units", UNIT),
        ("packages", PACKAGE),
    }
    assert all(c["unit"] == UNIT or c["subject"] == PACKAGE for c in result["changes"])  # nothing else
    assert "read in full" not in err
    old, new = result["old"]["blocks"], result["new"]["blocks"]
    assert old["mode"] == "full" and old["fallback"] is None and old["fetched"]
    assert new["mode"] == "incremental" and new["base_snapshot_id"] == pair.old and new["fallback"] is None
    assert new["changed_blocks"] == len(pair.changed)  # the front's listing: the blocks the update touched
    assert set(new["fetched"]) == set(served) <= pair.changed  # NEW's unchanged blocks are never fetched
    assert new["reused"] and not set(new["reused"]) & pair.changed
    needed = pair.walk & pair.changed
    assert needed, "the walk reads some of the update"
    assert len(served) <= 1.2 * len(needed), (len(served), sorted(needed))


def test_the_incremental_and_the_full_diff_agree(
    env: MotoEnv, pair: Pair, incremental: tuple[dict[str, Any], list[int], str], tmp_path: Path
) -> None:
    env.ebs.deny = "changed"  # no ebs:ListChangedBlocks: NEW is read in full
    full, err = diff(env, f"ebs:{pair.old}", f"ebs:{pair.new}", tmp_path / "full.json")
    assert f"ebs:{pair.new}: read in full" in err and "AccessDeniedException" in err
    assert full["new"]["blocks"]["mode"] == "full"
    assert "ListChangedBlocks refused" in full["new"]["blocks"]["fallback"]
    assert set(full["new"]["blocks"]["fetched"]) - pair.changed  # unchanged blocks fetched from NEW
    assert changes(full) == changes(incremental[0])
    assert full["verdict"] == incremental[0]["verdict"] and full["counts"] == incremental[0]["counts"]
    files, _ = diff(env, str(pair.disks[0]), str(pair.disks[1]), tmp_path / "files.json")
    assert changes(files) == changes(incremental[0])  # and the diff of the disk image files
    assert files["old"]["blocks"] is None and files["new"]["blocks"] is None


def test_unrelated_snapshots_are_read_in_full_and_say_why(
    env: MotoEnv, pair: Pair, incremental: tuple[dict[str, Any], list[int], str], tmp_path: Path
) -> None:
    result, err = diff(env, f"ebs:{pair.old}", f"ebs:{pair.other}", tmp_path / "other.json")
    assert "UNRELATED_SNAPSHOTS" in err and len(err.strip().splitlines()) >= 1
    fallback = result["new"]["blocks"]["fallback"]
    assert "ValidationException" in fallback and "UNRELATED_SNAPSHOTS" in fallback
    assert result["new"]["blocks"]["base_snapshot_id"] == pair.old
    assert changes(result) == changes(incremental[0])


def test_a_changed_block_listing_that_disagrees_is_not_trusted(
    env: MotoEnv, pair: Pair, incremental: tuple[dict[str, Any], list[int], str], tmp_path: Path
) -> None:
    env.ebs.changed_lie = {min(pair.changed)}  # "NEW no longer has it": NEW's own listing has it
    result, _ = diff(env, f"ebs:{pair.old}", f"ebs:{pair.new}", tmp_path / "lie.json")
    blocks = result["new"]["blocks"]
    assert blocks["mode"] == "full" and "disagrees" in blocks["fallback"]
    assert changes(result) == changes(incremental[0])


def test_the_front_answers_list_changed_blocks_in_the_models_shape(env: MotoEnv, pair: Pair) -> None:
    client = env.client("ebs")
    shape = client.meta.service_model.operation_model("ListChangedBlocks").output_shape
    env.ebs.changed_page = 1  # AWS may return fewer blocks than MaxResults: one a page
    seen: list[dict[str, Any]] = []
    params: dict[str, Any] = {"FirstSnapshotId": pair.old, "SecondSnapshotId": pair.new, "MaxResults": 100}
    while True:
        reply = client.list_changed_blocks(**params)
        reply.pop("ResponseMetadata")
        report = ParamValidator().validate(reply, shape)
        assert not report.has_errors(), report.generate_report()
        assert reply["BlockSize"] == BLOCK and reply["VolumeSize"] == 1
        seen += reply["ChangedBlocks"]
        if "NextToken" not in reply:
            break
        params["NextToken"] = reply["NextToken"]
    assert [b["BlockIndex"] for b in seen] == sorted(pair.changed)
    assert all("SecondBlockToken" in b for b in seen)  # NEW has every block OLD has here
    with pytest.raises(ClientError) as refused:
        client.list_changed_blocks(FirstSnapshotId=pair.old, SecondSnapshotId=pair.other)
    error = refused.value.response
    assert error["Error"]["Code"] == "ValidationException" and error["Reason"] == "UNRELATED_SNAPSHOTS"


def test_the_next_diff_of_the_same_snapshots_reads_them_from_the_audit_cache(
    env: MotoEnv, pair: Pair, incremental: tuple[dict[str, Any], list[int], str], tmp_path: Path
) -> None:
    first, _ = diff(env, f"ebs:{pair.old}", f"ebs:{pair.new}", tmp_path / "1.json", tmp_path / "cache")
    assert first["old"]["source"] == first["new"]["source"] == "image" and env.ebs.snapshot_gets
    assert len(list((tmp_path / "cache" / "imagelint" / "audits").glob("*.json"))) == 2
    env.ebs.reset()
    again, _ = diff(env, f"ebs:{pair.old}", f"ebs:{pair.new}", tmp_path / "2.json", tmp_path / "cache")
    assert again["old"]["source"] == again["new"]["source"] == "cache"
    assert again["old"]["blocks"] is None and env.ebs.snapshot_gets == [] and env.ebs.lists == 0
    assert changes(again) == changes(first) == changes(incremental[0])


def test_the_next_release_reads_neither_old_nor_news_unchanged_blocks(
    env: MotoEnv, pair: Pair, incremental: tuple[dict[str, Any], list[int], str], tmp_path: Path
) -> None:
    """The pipeline: the last gate read OLD (here against another lineage); this gate takes OLD's
    audit from the audit cache and its blocks from the block store, and fetches from NEW only
    changed blocks: the same answers as the full diff, and no GetSnapshotBlock on OLD at all."""
    cache = tmp_path / "cache"
    diff(env, f"ebs:{pair.old}", f"ebs:{pair.other}", tmp_path / "last.json", cache)
    assert list((cache / "imagelint" / "blocks").glob("*.blk"))
    env.ebs.reset()
    warm, err = diff(env, f"ebs:{pair.old}", f"ebs:{pair.new}", tmp_path / "warm.json", cache)
    assert warm["old"]["source"] == "cache" and warm["new"]["source"] == "image"
    assert "read in full" not in err
    blocks = warm["new"]["blocks"]
    assert blocks["mode"] == "incremental" and blocks["fallback"] is None
    assert (
        blocks["base_fetched"] == [] and blocks["reused"] and set(blocks["stored"]) == set(blocks["reused"])
    )
    served = [i for s, i in env.ebs.snapshot_gets if s == pair.new]
    assert [i for s, i in env.ebs.snapshot_gets if s == pair.old] == []
    assert set(served) <= pair.changed and len(served) <= 1.2 * len(pair.walk & pair.changed)
    assert changes(warm) == changes(incremental[0])
    assert warm["verdict"] == incremental[0]["verdict"]


def test_a_corrupt_stored_block_is_fetched_again_not_served(
    env: MotoEnv, pair: Pair, incremental: tuple[dict[str, Any], list[int], str], tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    diff(env, f"ebs:{pair.old}", f"ebs:{pair.other}", tmp_path / "last.json", cache)
    for entry in (cache / "imagelint" / "blocks").glob("*.blk"):  # every stored block, one bit off
        raw = bytearray(entry.read_bytes())
        raw[-1] ^= 1
        entry.write_bytes(bytes(raw))
    env.ebs.reset()
    again, _ = diff(env, f"ebs:{pair.old}", f"ebs:{pair.new}", tmp_path / "again.json", cache)
    blocks = again["new"]["blocks"]
    assert blocks["stored"] == [] and blocks["base_fetched"]  # OLD's blocks fetched again, from OLD
    assert changes(again) == changes(incremental[0])


def test_a_snapshot_against_another_kind_of_side_says_why_it_is_read_in_full(
    env: MotoEnv, pair: Pair, incremental: tuple[dict[str, Any], list[int], str], tmp_path: Path
) -> None:
    result, err = diff(env, str(pair.disks[0]), f"ebs:{pair.new}", tmp_path / "mixed.json")
    assert "OLD is not an EBS snapshot" in result["new"]["blocks"]["fallback"]
    assert f"ebs:{pair.new}: read in full" in err and "OLD is not an EBS snapshot" in err
    assert changes(result) == changes(incremental[0])


def register_volumes(env: MotoEnv, root: str, others: dict[str, str], name: str) -> str:
    """An AMI with ``root`` on /dev/xvda and ``others`` (device → snapshot) beside it. moto 5.2's
    images map their root snapshot only; the image's mappings are given the others in its backend
    (in this process), so that DescribeImages answers what AWS would."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    image_id = register_image(env.client("ec2"), root, name=name)
    image = ec2_backends[DEFAULT_ACCOUNT_ID][REGION].amis[image_id]
    extra = [
        {"DeviceName": device, "Ebs": {"SnapshotId": snap, "VolumeSize": 1, "DeleteOnTermination": True}}
        for device, snap in others.items()
    ]
    base = type(image)
    mapped = base.block_device_mappings.fget  # type: ignore[attr-defined]
    image.__class__ = type(
        "ImageWithVolumes", (base,), {"block_device_mappings": property(lambda self: [*mapped(self), *extra])}
    )
    return image_id


def data_volume(work: Path, name: str, content: str) -> Path:
    """A bare ext4 filesystem with a file and no OS tree: a data volume."""
    import subprocess

    (work / name / "data").mkdir(parents=True)
    (work / name / "data" / "file").write_text(content)
    image = work / f"{name}.img"
    with image.open("wb") as f:
        f.truncate(16 * 1024 * 1024)
    subprocess.run(["mkfs.ext4", "-q", "-d", str(work / name), str(image)], check=True)
    return image


def test_two_amis_are_diffed_volume_by_volume_matched_by_device(
    env: MotoEnv, pair: Pair, incremental: tuple[dict[str, Any], list[int], str], tmp_path: Path
) -> None:
    data1, _ = upload_image(env.client("ebs"), data_volume(tmp_path, "data1", "one"))
    data2, _ = upload_image(env.client("ebs"), data_volume(tmp_path, "data2", "two"), parent=data1)
    old_volumes = {"/dev/xvdb": pair.old, "/dev/xvdc": pair.other, "/dev/xvde": data1, "/dev/xvdf": data1}
    new_volumes = {"/dev/xvdb": pair.new, "/dev/xvdd": pair.other, "/dev/xvde": data2, "/dev/xvdf": data1}
    old = register_volumes(env, pair.old, old_volumes, "release-1")
    new = register_volumes(env, pair.new, new_volumes, "release-2")
    env.ebs.reset()
    result, err = diff(env, old, f"{REGION}:{new}", tmp_path / "amis.json")
    assert result["old"]["description"] == f"{old} ({REGION})" and result["new"]["complete"]
    by_device: dict[str | None, list[tuple[str, str, str, str]]] = {}
    for change in result["changes"]:
        by_device.setdefault(change.get("device"), []).append(
            (change["kind"], change["action"], change["subject"], change["detail"])
        )
    assert sorted(by_device) == ["/dev/xvda", "/dev/xvdb", "/dev/xvdc", "/dev/xvdd", "/dev/xvde"]
    update = sorted(changes(incremental[0]))
    assert sorted(by_device["/dev/xvda"]) == sorted(by_device["/dev/xvdb"]) == update  # each pair: the update
    assert by_device["/dev/xvdc"] == [
        (
            "volumes",
            "warn",
            "/dev/xvdc",
            f"/dev/xvdc: a volume only {old} mapped ({pair.other}); not compared",
        )
    ]
    assert [c[:3] for c in by_device["/dev/xvdd"]] == [("volumes", "warn", "/dev/xvdd")]
    ((kind, _, _, detail),) = by_device["/dev/xvde"]  # a data volume whose snapshot changed
    assert kind == "volumes" and "no OS tree" in detail and "not compared" in detail
    assert data1 in detail and data2 in detail
    volumes = {v["device"]: v for v in result["volumes"]}
    assert volumes["/dev/xvdc"]["old"] is None and volumes["/dev/xvdd"]["new"] is None
    for device in ("/dev/xvda", "/dev/xvdb"):  # each pair of one lineage: NEW through ListChangedBlocks
        assert volumes[device]["new"]["blocks"]["mode"] == "incremental"
        assert volumes[device]["new"]["blocks"]["base_snapshot_id"] == pair.old
    assert result["verdict"] == "fail" and result["counts"]["by_kind"]["volumes"] == 3
    read = {s for s, _ in env.ebs.snapshot_gets}
    assert pair.other not in read  # a one-sided volume is not read
    assert volumes["/dev/xvdf"]["old"] is None  # the same snapshot on both sides: not read
    assert "[/dev/xvda]" not in err


def test_the_warm_pipeline_diffs_amis_with_no_read_of_old(
    env: MotoEnv, pair: Pair, incremental: tuple[dict[str, Any], list[int], str], tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    older = register_volumes(env, pair.other, {}, "release-0")
    old = register_volumes(env, pair.old, {}, "release-1w")
    new = register_volumes(env, pair.new, {}, "release-2w")
    diff(env, older, old, tmp_path / "last.json", cache, code=0)  # the last gate (another lineage)
    env.ebs.reset()
    result, _ = diff(env, old, new, tmp_path / "warm.json", cache)
    assert (
        result["old"]["source"] == "cache" and result["volumes"][0]["new"]["blocks"]["mode"] == "incremental"
    )
    assert [i for s, i in env.ebs.snapshot_gets if s == pair.old] == []
    assert sorted(c[:] for c in changes(result)) == sorted(changes(incremental[0]))


def test_an_ami_against_another_kind_of_side_is_bad_usage(env: MotoEnv, pair: Pair, tmp_path: Path) -> None:
    proc = run_cli(
        "diff", "ami-0123456789abcdef0", f"ebs:{pair.new}", env={**env.env, "IMAGELINT_NO_CACHE": "1"}
    )
    assert proc.returncode == 2 and "an AMI is diffed against an AMI" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
