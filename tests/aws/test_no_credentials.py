"""No AWS credentials at all: every AWS door says so in one line naming the credential chain, exit 3
(never "internal error … please report")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DOORS = [
    ["audit", "ebs:snap-0123456789abcdef0"],
    ["diff", "ebs:snap-0123456789abcdef0", "ebs:snap-0123456789abcdef1"],
    ["ami", "check", "ami-0123456789abcdef0", "--mode", "snapshot"],
]


@pytest.mark.parametrize("args", DOORS, ids=lambda a: a[0])
def test_no_credentials_is_one_line_naming_the_chain(tmp_path: Path, args: list[str]) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),  # no ~/.aws
        "AWS_EC2_METADATA_DISABLED": "true",  # no instance role to ask for
        "AWS_DEFAULT_REGION": "us-east-1",
        "IMAGELINT_NO_CACHE": "1",
        "NO_COLOR": "1",
    }
    exe = Path(sys.executable).parent / "imagelint"
    proc = subprocess.run([exe, *args], capture_output=True, text=True, env=env, timeout=120, check=False)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("imagelint: error:")]
    assert proc.returncode == 3, proc.stderr
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "no AWS credentials found" in errors[0] and "credential chain" in errors[0]
    assert "internal error" not in proc.stderr and "please report" not in proc.stderr.lower()
