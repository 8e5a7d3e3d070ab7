"""Readers for what GitHub Actions reads: workflow commands, $GITHUB_OUTPUT files, and the sample image."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from imagelint.sampletree import build_image
from tests.support import REPO

SAMPLE_CONFIG = REPO / "examples" / "sample.imagelint.yaml"
SARIF_SCHEMA = REPO / "tests" / "formats" / "sarif-schema-2.1.0.json"
COMMAND = re.compile(r"^::(?P<kind>error|warning|notice)(?: (?P<props>[^:]*))?::(?P<data>.*)$")


def sample_image(dest: Path) -> Path:
    entries = yaml.safe_load((REPO / "examples/sample-image.yaml").read_text())["files"]
    return build_image(dest, entries)


def unescape_data(text: str) -> str:
    """The runner's unescaping of command data (actions/runner ActionCommand.Unescape)."""
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def unescape_property(text: str) -> str:
    return (
        text.replace("%0D", "\r")
        .replace("%0A", "\n")
        .replace("%3A", ":")
        .replace("%2C", ",")
        .replace("%25", "%")
    )


def parse_commands(stdout: str) -> list[dict[str, str]]:
    """Every annotation command in a step's log, parsed as the runner does."""
    found = []
    for line in stdout.splitlines():
        match = COMMAND.match(line)
        if not match:
            continue
        props = {}
        for item in filter(None, (match["props"] or "").split(",")):
            key, _, value = item.partition("=")
            props[key] = unescape_property(value)
        found.append({"kind": match["kind"], **props, "message": unescape_data(match["data"])})
    return found


def parse_output_file(path: Path) -> dict[str, str]:
    """$GITHUB_OUTPUT as the runner reads it: ``name=value`` or ``name<<DELIM`` … ``DELIM``."""
    values: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body = []
            while lines[i] != delimiter:
                body.append(lines[i])
                i += 1
            i += 1
            values[name] = "\n".join(body)
        else:
            name, value = line.split("=", 1)
            values[name] = value
    return values
