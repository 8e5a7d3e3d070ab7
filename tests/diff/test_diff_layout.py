"""Snapshot of `imagelint diff`'s text and Markdown on a pair of small trees that change one thing
of every kind (rewrite with IMAGELINT_UPDATE_SNAPSHOTS=1 when the layout changes on purpose), and
the escaping of hostile unit names in both channels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imagelint.report.escape import for_markdown
from tests.formats.test_text_report import check_snapshot
from tests.support import os_root, run_cli

AGENT = (
    "[Unit]\nDescription=agent\n[Service]\nExecStart=/usr/bin/agent\n{extra}"
    "[Install]\nWantedBy=multi-user.target\n"
)
STATUS = "Package: {name}\nStatus: install ok installed\nArchitecture: amd64\nVersion: {version}\n\n"


def _tree(root: Path, *, new: bool) -> Path:
    entries: dict[str, object] = {
        "/etc/os-release": f'ID=debian\nVERSION_ID="{12 if not new else 13}"\n',
        "/etc/default/grub": 'GRUB_CMDLINE_LINUX="console=ttyS0' + (' audit=0"\n' if new else '"\n'),
        "/usr/lib/systemd/system/agent.service": AGENT.format(
            extra="Restart=always\nRestartSec=5s\n" if new else "Restart=always\n"
        ),
        "/etc/systemd/system/multi-user.target.wants/agent.service": {
            "link": "/usr/lib/systemd/system/agent.service"
        },
        "/usr/lib/systemd/system/old.service": AGENT.replace("agent", "old").format(extra=""),
        "/var/lib/dpkg/status": STATUS.format(name="agent", version="1.0" if not new else "1.1")
        + STATUS.format(name="gone" if not new else "vendor-tools", version="2"),
    }
    if not new:
        entries["/usr/bin/agent"] = {"content": "#!/bin/sh\n", "mode": "0755"}
        entries["/etc/systemd/system/multi-user.target.wants/old.service"] = {
            "link": "/usr/lib/systemd/system/old.service"
        }
    else:
        entries["/usr/lib/systemd/system/vendor.service"] = AGENT.replace(
            "/usr/bin/agent", "/opt/vendor/run"
        ).format(extra="Restart=always\nRestartSec=0\n")
        entries["/etc/systemd/system/multi-user.target.wants/vendor.service"] = {
            "link": "/usr/lib/systemd/system/vendor.service"
        }
        entries["/etc/systemd/system/agent.service.d/override.conf"] = "[Service]\nNice=5\n"
    return os_root(root, entries)


def _mask(text: str, work: Path) -> str:
    for path in {str(work.resolve()), str(work)}:
        text = text.replace(path, "<WORK>").replace(for_markdown(path), "<WORK>")
    return text


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_text_and_markdown_layout(tmp_path: Path, fmt: str) -> None:
    old, new = _tree(tmp_path / "old", new=False), _tree(tmp_path / "new", new=True)
    proc = run_cli("diff", str(old), str(new), "--no-builtin-rules", "-f", fmt)
    assert proc.returncode == 1, proc.stderr
    check_snapshot(f"diff.{'txt' if fmt == 'text' else 'md'}", _mask(proc.stdout, tmp_path))


def test_the_layout_pair_changes_one_thing_of_every_unit_and_image_kind(tmp_path: Path) -> None:
    old, new = _tree(tmp_path / "old", new=False), _tree(tmp_path / "new", new=True)
    proc = run_cli("diff", str(old), str(new), "--no-builtin-rules", "-f", "json")
    changes = json.loads(proc.stdout)["changes"]
    assert {c["kind"] for c in changes} == {
        "new-boot-units", "removed-boot-units", "enablement", "restart-policy", "executables",
        "dropins", "packages", "image",
    }  # fmt: skip
    restart = next(c for c in changes if c["kind"] == "restart-policy")
    assert restart["detail"].startswith("RestartSec=0.1s → 5s; the start limit can no longer trip: ")
    gone = next(c for c in changes if c["kind"] == "executables")
    assert (gone["subject"], gone["change"]) == ("agent.service", "removed")
    assert gone["detail"] == "/usr/bin/agent: now missing from the image"


def test_hostile_strings_cannot_forge_lines_or_markup(tmp_path: Path) -> None:
    old = os_root(tmp_path / "old", {"/etc/os-release": "ID=x\n"})
    name = "evil::error::x.service"
    new = os_root(
        tmp_path / "new",
        {
            "/etc/os-release": "ID=x\n",
            f"/etc/systemd/system/{name}": "[Service]\nExecStart=/opt/a<img/src=x>\x1b[2J\rFAIL\n",
            f"/etc/systemd/system/multi-user.target.wants/{name}": {"link": f"/etc/systemd/system/{name}"},
        },
    )
    md = tmp_path / "diff.md"
    proc = run_cli("diff", str(old), str(new), "--no-builtin-rules", "-f", "text", "-f", f"markdown:{md}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = next(line for line in proc.stdout.splitlines() if name in line)
    assert "\x1b" not in proc.stdout and "\r" not in proc.stdout
    assert line.endswith("missing: /opt/a<img/src=x>\\x1b[2J)")  # as written, escaped for a terminal
    text = md.read_text()
    assert "<img" not in text and "\x1b" not in text and "&#60;img" in text
