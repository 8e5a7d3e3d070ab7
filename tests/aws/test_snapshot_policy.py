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


def test_the_snapshot_gate_example_names_every_action_of_the_policy() -> None:
    example = (REPO / "examples" / "workflows" / "gate-ami-snapshot.yml").read_text(encoding="utf-8")
    comment = " ".join(line for line in example.splitlines() if line.startswith("#"))
    actions = {a for s in IAM_POLICY["Statement"] for a in s["Action"]}
    assert actions and {a for a in actions if a not in comment} == set()
    assert "root snapshot" not in comment  # every EBS volume of the AMI is read
    assert "--candidate-tag" in comment and "--account" in comment  # CreateTags' scope, filled in
