"""The openers: one registry turns every spec into an opened target, and a new kind is one module."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import imagelint.openers
from imagelint.errors import TargetError
from imagelint.openers import OpenOptions, open_spec, openers
from tests.support import os_root, run_cli


def test_every_kind_is_found_and_asked_in_order() -> None:
    kinds = [o.kind for o in openers()]
    assert kinds == [
        "ssh",
        "host",
        "ebs-snapshot",
        "bundle",
        "report",
        "path",
    ]  # a prefix before a sniff before "a path"


def test_a_report_is_a_side_only_where_the_command_asks_for_one(tmp_path: Path) -> None:
    root = os_root(tmp_path / "image", {"/etc/hostname": "x\n"})
    report = tmp_path / "r.json"
    assert run_cli("audit", str(root), "-f", f"json:{report}").returncode == 0
    with open_spec(str(report), OpenOptions(reports=True)) as opened:
        assert opened.kind == "report" and opened.report[0]["target"]["path"] == str(root)
    proc = run_cli("audit", str(report))  # audit: a JSON file is no image (a disk image is sniffed)
    assert proc.returncode == 3 and "too small to be a disk image" not in proc.stderr
    assert proc.stderr.startswith(f"imagelint: error: {report}: ")


def test_a_missing_spec_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="image root does not exist"), open_spec(str(tmp_path / "nope")):
        pass


def test_a_new_kind_of_target_is_one_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CONTRIBUTING's 'How to add a target': an opener module and its line in OPENER_MODULES."""
    package = tmp_path / "extra"
    package.mkdir()
    (package / "tree_json.py").write_text(
        textwrap.dedent(
            """
            import contextlib, json, tempfile
            from pathlib import Path
            from imagelint.openers import Opened
            from imagelint.sampletree import build_image
            from imagelint.targets import RootfsTarget


            class TreeJsonOpener:
                kind = "tree-json"
                order = 35

                def claims(self, spec, options):
                    return spec.startswith("tree:")

                @contextlib.contextmanager
                def open(self, spec, options):
                    with tempfile.TemporaryDirectory() as scratch:
                        tree = json.loads(open(spec[len("tree:"):]).read())
                        yield Opened(self.kind, RootfsTarget(build_image(Path(scratch) / "root", tree)))


            OPENER = TreeJsonOpener()
            """
        )
    )
    monkeypatch.setattr(imagelint.openers, "__path__", [*imagelint.openers.__path__, str(package)])
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(imagelint.openers, "OPENER_MODULES", (*imagelint.openers.OPENER_MODULES, "tree_json"))
    monkeypatch.setattr(imagelint.openers, "_OPENERS", [])
    monkeypatch.setitem(
        __import__("sys").modules, "imagelint.openers.tree_json", __import__("extra.tree_json").tree_json
    )
    spec = tmp_path / "tree.json"
    spec.write_text(json.dumps({"/etc/machine-id": "6f1c3a9e2b7d4e5f8a0b1c2d3e4f5a6b\n"}))
    with open_spec(f"tree:{spec}") as opened:
        assert opened.kind == "tree-json"
        assert opened.target is not None and opened.target.exists("/etc/machine-id")
