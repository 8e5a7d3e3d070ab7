"""The wheel ships the built-in rule packs, the demo's sample image behaves, and the code is ruff clean."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from imagelint.sampletree import build_tree
from tests.support import REPO, run_cli


@pytest.mark.slow
def test_wheel_installs_and_lists_builtin_rules(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"), str(REPO)],
        check=True,
        capture_output=True,
    )
    wheel = next((tmp_path / "dist").glob("imagelint-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([venv / "bin/pip", "install", "-q", str(wheel)], check=True, capture_output=True)
    proc = subprocess.run(
        [venv / "bin/imagelint", "rules", "list", "--json"], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    listed = {r["id"] for r in json.loads(proc.stdout)}
    in_repo = {
        r["id"] for f in (REPO / "rules").glob("*.yaml") for r in yaml.safe_load(f.read_text())["rules"]
    }
    assert listed == in_repo


def test_sample_image_shows_the_faults(tmp_path: Path) -> None:
    entries = yaml.safe_load((REPO / "examples/sample-image.yaml").read_text())["files"]
    root = build_tree(tmp_path / "sample", entries)
    out = tmp_path / "r.json"
    proc = run_cli(
        "audit", str(root), "-c", str(REPO / "examples/sample.imagelint.yaml"), "-f", f"json:{out}"
    )
    report = json.loads(out.read_text())
    assert proc.returncode == 1
    fired = {f["rule_id"] for f in report["findings"] if f["waiver"] is None}
    assert {"IL101", "IL102", "IL104", "IL107", "IL109", "IL110"} <= fired
    # the ECS agent of the incident: enabled without a cluster, binary missing, restarting forever,
    # enabled by hand, requiring a unit that is not there
    assert {"IL501", "IL201", "IL202", "IL203", "IL204"} <= fired
    assert {f["rule_id"] for f in report["findings"] if f["waiver"]} == {"IL108"}


def test_ruff_is_clean() -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    assert ruff, "ruff is installed with the test extras"
    check = subprocess.run([ruff, "check", "."], cwd=REPO, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    fmt = subprocess.run([ruff, "format", "--check", "."], cwd=REPO, capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stdout
