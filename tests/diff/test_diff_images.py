"""`imagelint diff` on real images: a vendor update (a real .deb installed with apt inside the tree,
plus a planted ECS agent) against the debootstrapped base, and two independent debootstraps.

Oracles: dpkg-query on both trees for the package changes, systemctl --root for the enablement of
the new units, the official diff schema for the JSON.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.support import REPO, copy_rootfs, run_cli

UNIT_KINDS = {
    "new-boot-units",
    "removed-boot-units",
    "unit-files",
    "enablement",
    "preset",
    "restart-policy",
    "executables",
    "dropins",
    "default-target",
}
NODE_EXPORTER = "prometheus-node-exporter.service"


def _plant_ecs(root: Path) -> None:
    """The sample image's ECS agent (unit file, enabling link, config without a cluster)."""
    entries = yaml.safe_load((REPO / "examples/sample-image.yaml").read_text())["files"]
    for path, entry in entries.items():
        if "ecs" not in path:
            continue
        host = root / path.lstrip("/")
        host.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(entry, dict) and "link" in entry:
            host.symlink_to(entry["link"])
        else:
            host.write_text(entry)


@pytest.fixture(scope="module")
def updated(vendor_rootfs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_rootfs(vendor_rootfs, tmp_path_factory.mktemp("vendor") / "rootfs")
    for cache in (root / "var/cache/apt").glob("*.bin"):  # the vendor's clean-up step
        cache.unlink()
    _plant_ecs(root)
    return root


def _diff(*args: str, cwd: Path | None = None) -> tuple[int, dict, str]:
    proc = run_cli("diff", *args, "-f", "json", cwd=cwd)
    assert proc.returncode in (0, 1, 3), proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def _schema() -> dict:
    proc = run_cli("schema", "diff")
    assert proc.returncode == 0
    return json.loads(proc.stdout)


def _dpkg(root: Path) -> dict[str, str]:
    proc = subprocess.run(
        ["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W",
         "-f", "${db:Status-Abbrev} ${Package} ${Version}\n"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return {p[1]: p[2] for p in (line.split() for line in proc.stdout.splitlines()) if p[0].startswith("i")}


def test_a_vendor_update_is_named_exactly_new_units_with_chains_and_packages(
    debian_rootfs: Path, updated: Path
) -> None:
    code, result, _ = _diff(str(debian_rootfs), str(updated))
    jsonschema.validate(result, _schema())
    assert code == 1 and result["verdict"] == "fail"  # new boot units fail by default
    units = [c for c in result["changes"] if c["kind"] in UNIT_KINDS]
    assert {(c["kind"], c["subject"]) for c in units} == {
        ("new-boot-units", NODE_EXPORTER),
        ("new-boot-units", "ecs.service"),
    }
    chains = {c["subject"]: c["chain"] for c in units}
    assert chains["ecs.service"][-2:] == ["multi-user.target", "ecs.service"]
    assert chains[NODE_EXPORTER][-2:] == ["multi-user.target", NODE_EXPORTER]
    assert all(chain[0] == "default.target" for chain in chains.values())
    for unit in chains:  # the real tool agrees that the vendor enabled them
        proc = subprocess.run(
            ["systemctl", f"--root={updated}", "is-enabled", unit], capture_output=True, text=True
        )
        assert proc.stdout.strip() == "enabled"
    assert all(c["action"] == "fail" for c in units)

    old, new = _dpkg(debian_rootfs), _dpkg(updated)
    expected = {n: ("added", new[n]) for n in new.keys() - old.keys()}
    expected |= {n: ("removed", None) for n in old.keys() - new.keys()}
    expected |= {n: ("changed", new[n]) for n in old.keys() & new.keys() if old[n] != new[n]}
    packages = {c["subject"]: (c["change"], c["new"]) for c in result["changes"] if c["kind"] == "packages"}
    assert packages == expected and "prometheus-node-exporter" in packages

    others = [c for c in result["changes"] if c["kind"] not in UNIT_KINDS | {"packages"}]
    assert others and {c["kind"] for c in others} == {"new-findings"}
    assert {c["unit"] for c in others} == {"ecs.service"}  # the planted agent's faults, nothing else


def test_the_config_allows_units_ignores_kinds_and_the_text_names_chains(
    debian_rootfs: Path, updated: Path, tmp_path: Path
) -> None:
    (tmp_path / "cfg.yaml").write_text(
        "version: 1\ndiff:\n  new-findings: warn\n  packages: ignore\n"
        f"  allow-units: [{NODE_EXPORTER}, 'ecs*']\n"
    )
    proc = run_cli("diff", str(debian_rootfs), str(updated), "-c", str(tmp_path / "cfg.yaml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert any(
        line.startswith(f"ALLOWED new-boot-units {NODE_EXPORTER}: started at boot: default.target → ")
        for line in lines
    )
    assert not any(" packages " in line for line in lines)
    assert lines[-1].startswith("result: pass: 0 change(s) fail")


def test_two_independent_debootstraps_differ_in_no_unit(debian_rootfs: Path, twin_rootfs: Path) -> None:
    assert (debian_rootfs / ".imagelint-rootfs-complete").stat().st_ino != (
        twin_rootfs / ".imagelint-rootfs-complete"
    ).stat().st_ino
    code, result, _ = _diff(str(debian_rootfs), str(twin_rootfs))
    assert [c for c in result["changes"] if c["kind"] in UNIT_KINDS] == []
    assert result["old"]["units"] == result["new"]["units"] > 100
    assert code == 0


@pytest.mark.slow
def test_report_files_diff_as_the_images_they_describe(
    debian_rootfs: Path, updated: Path, tmp_path: Path
) -> None:
    for name, root in (("old", debian_rootfs), ("new", updated)):
        proc = run_cli("audit", str(root), "-f", f"json:{tmp_path / name}.json")
        assert proc.returncode in (0, 1), proc.stderr
    _, from_images, _ = _diff(str(debian_rootfs), str(updated))
    code, from_reports, _ = _diff(str(tmp_path / "old.json"), str(tmp_path / "new.json"))
    assert code == 1 and from_reports["changes"] == from_images["changes"]
    assert from_reports["old"]["source"] == "report" and len(from_reports["old"]["sha256"]) == 64
    code, mixed, _ = _diff(str(tmp_path / "old.json"), str(updated))
    assert mixed["changes"] == from_images["changes"]


def test_unreadable_sides_are_inconclusive_and_bad_usage_is_2(debian_rootfs: Path, tmp_path: Path) -> None:
    proc = run_cli("diff", str(tmp_path / "missing"), str(debian_rootfs))
    assert proc.returncode == 3 and proc.stderr.startswith("imagelint: error: ")
    assert "missing" in proc.stderr and "Traceback" not in proc.stderr
    (tmp_path / "not-a-report.json").write_text('{"verdict": "pass"}')
    proc = run_cli("diff", str(tmp_path / "not-a-report.json"), str(debian_rootfs))
    assert proc.returncode == 3 and "not an imagelint report" in proc.stderr
    proc = run_cli("diff", str(debian_rootfs), str(debian_rootfs), "-f", "sarif")
    assert (
        proc.returncode == 2
        and "format 'sarif' cannot write a diff (formats that can: text, json, markdown)" in proc.stderr
    )


def test_an_image_whose_package_database_cannot_be_read_is_inconclusive(
    debian_rootfs: Path, tmp_path: Path
) -> None:
    root = copy_rootfs(debian_rootfs, tmp_path / "rootfs")
    status = root / "var/lib/dpkg/status"
    with open(status, "r+b") as f:
        f.truncate(17 * 1024 * 1024)  # over the target's 16 MiB read cap
    code, result, _ = _diff(str(debian_rootfs), str(root))
    assert code == 3 and result["verdict"] == "inconclusive" and result["new"]["complete"] is False
    assert not [c for c in result["changes"] if c["kind"] == "packages"]  # no guess from half a database
