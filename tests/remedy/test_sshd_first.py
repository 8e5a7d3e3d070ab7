"""The script's awk test and --apply's Python test of sshd_config's leading directives agree (real awk)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from imagelint.remedy.sshd_first import AWK, already_set

CASES = [
    "",
    "PasswordAuthentication no\n",
    "passwordauthentication   no  \r\n",
    "PasswordAuthentication=no\n",
    "PasswordAuthentication = no\n",
    "PasswordAuthentication yes\nPasswordAuthentication no\n",
    "# comment\n\n  \tPasswordAuthentication no\n",
    "Include /etc/ssh/sshd_config.d/*.conf\nPasswordAuthentication no\n",
    "Match User x\nPasswordAuthentication no\n",
    "PermitRootLogin no\nPasswordAuthentication no\n",
    "PasswordAuthenticationX no\n",
    "PasswordAuthentication no extra\n",
    "\xe9\xff PasswordAuthentication no\n",
]


@pytest.mark.parametrize("text", CASES)
def test_awk_and_python_agree(tmp_path: Path, text: str) -> None:
    path = tmp_path / "sshd_config"
    path.write_bytes(text.encode("latin-1"))
    proc = subprocess.run(
        ["awk", "-v", "k=PasswordAuthentication", "-v", "v=no", AWK, str(path)],
        capture_output=True,
        check=False,
    )
    assert (proc.returncode == 0) == already_set(text, "PasswordAuthentication", "no"), text
