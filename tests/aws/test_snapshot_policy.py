"""The IAM policy snapshot mode needs is written once (imagelint.aws.snapshot.IAM_POLICY) and the
docs (docs/reference/iam-policies.md) and `imagelint ami policies snapshot-mode` show exactly that policy."""

from __future__ import annotations

import json
import re

from imagelint.aws.snapshot import IAM_POLICY
from tests.support import REPO, run_cli


def test_docs_give_the_policy() -> None:
    page = (REPO / "docs" / "reference" / "iam-policies.md").read_text(encoding="utf-8")
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", page, flags=re.S)]
    assert IAM_POLICY in blocks


def test_ami_policies_gives_the_policy() -> None:
    proc = run_cli("ami", "policies", "snapshot-mode")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == IAM_POLICY
