"""The wheel ships the built-in rule packs, the demo's sample image behaves, and the code is ruff clean."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from imagelint.sampletree import build_image
from tests.support import REPO, run_cli


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel, built from the checkout as a release would be (python -m build)."""
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(REPO)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    assert found, f"{name} is installed with the test extras"
    return found


@pytest.mark.slow
def test_the_release_artifacts_pass_twine_and_check_wheel_contents(dist: Path) -> None:
    (sdist,) = dist.glob("imagelint-*.tar.gz")
    (wheel,) = dist.glob("imagelint-*.whl")
    from imagelint import __version__

    assert sdist.name == f"imagelint-{__version__}.tar.gz"  # one source of the version: imagelint/__init__.py
    assert wheel.name == f"imagelint-{__version__}-py3-none-any.whl"
    twine = subprocess.run(
        [_tool("twine"), "check", "--strict", str(sdist), str(wheel)], capture_output=True, text=True
    )
    assert twine.returncode == 0, twine.stdout + twine.stderr
    contents = subprocess.run([_tool("check-wheel-contents"), str(wheel)], capture_output=True, text=True)
    assert contents.returncode == 0, contents.stdout + contents.stderr
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"imagelint-{__version__}.dist-info/METADATA").decode()
    urls = [line for line in metadata.splitlines() if line.startswith("Project-URL: ")]
    assert "Project-URL: Source, https://github.com/imagelint/imagelint" in urls, urls
    extras = sorted(
        line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Provides-Extra: ")
    )
    assert extras == ["disk", "watch"], extras  # what users install; test and docs tools are groups


@pytest.mark.slow
def test_the_wheel_installs_in_a_fresh_venv_and_audits_the_sample(dist: Path, tmp_path: Path) -> None:
    from imagelint import __version__

    wheel = next(dist.glob("imagelint-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([venv / "bin/pip", "install", "-q", str(wheel)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    version = subprocess.run(
        [venv / "bin/imagelint", "--version"], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert version.returncode == 0 and version.stdout == f"imagelint {__version__}\n", version
    proc = subprocess.run(
        [venv / "bin/imagelint", "rules", "list", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    listed = {r["id"] for r in json.loads(proc.stdout)}
    in_repo = {
        r["id"] for f in (REPO / "rules").glob("*.yaml") for r in yaml.safe_load(f.read_text())["rules"]
    }
    assert listed == in_repo
    entries = yaml.safe_load((REPO / "examples/sample-image.yaml").read_text())["files"]
    root = build_image(tmp_path / "sample", entries)
    config = str(REPO / "examples/sample.imagelint.yaml")
    audit = subprocess.run(
        [venv / "bin/imagelint", "audit", str(root), "-c", config, "-f", "json"],
        capture_output=True, text=True, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert audit.returncode == 1, audit.stderr
    report = json.loads(audit.stdout)
    assert {"IL101", "IL201"} <= {f["rule_id"] for f in report["findings"]}
    assert report["tool"] == {"name": "imagelint", "version": __version__}


def test_sample_image_shows_the_faults(tmp_path: Path) -> None:
    entries = yaml.safe_load((REPO / "examples/sample-image.yaml").read_text())["files"]
    root = build_image(tmp_path / "sample", entries)
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
