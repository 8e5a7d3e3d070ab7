"""The diff's text and markdown lines name a change's device in a diff of two AMIs (escaped)."""

from __future__ import annotations

from imagelint.diff.compare import Change, Side
from imagelint.diff.result import DiffResult
from imagelint.formats.diff_lines import render_markdown, render_text
from imagelint.report.model import Verdict


def result(device: str | None) -> DiffResult:
    side = Side("ami-0123456789abcdef0 (us-east-1)", "image", {"complete": True})
    change = Change("packages", "vendor-agent", "added", "vendor-agent 1.0 added", device=device)
    return DiffResult(side, side, [change], Verdict.PASS)


def test_a_change_names_its_device_only_in_a_diff_of_amis() -> None:
    assert "WARN    packages [/dev/xvdb] vendor-agent: vendor-agent 1.0 added" in render_text(
        result("/dev/xvdb")
    )
    assert "packages vendor-agent:" in render_text(result(None))
    assert "<code>/dev/xvdb</code> <code>vendor-agent</code>" in render_markdown(result("/dev/xvdb"))
    assert "device" not in result(None).to_dict()["changes"][0]
    assert result("/dev/xvdb").to_dict()["changes"][0]["device"] == "/dev/xvdb"


def test_a_hostile_device_name_is_escaped_for_the_terminal() -> None:
    text = render_text(result("/dev/x\x1b[31mvdb"))
    assert "\x1b" not in text
