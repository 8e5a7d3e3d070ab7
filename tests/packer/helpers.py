"""Running Packer 1.6.6 as a user would, and reading the shipped HCL2 templates with python-hcl2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import REPO, need

PACKER_DIR = REPO / "packer"
TEMPLATES = Path(__file__).resolve().parent / "templates"
VENV_BIN = Path(sys.executable).parent

# The shipped recipes, one directory each (packer loads every *.pkr.hcl of a directory).
AMI_GATE = PACKER_DIR / "ami-gate" / "imagelint-ami-gate.pkr.hcl"
AMI_GATE_DELETE = PACKER_DIR / "ami-gate-delete" / "imagelint-ami-gate-delete.pkr.hcl"
PROVISIONER = PACKER_DIR / "provisioner" / "imagelint-provisioner-gate.pkr.hcl"
CHROOT = PACKER_DIR / "chroot" / "imagelint-chroot-gate.pkr.hcl"
SHIPPED = [AMI_GATE, AMI_GATE_DELETE, PROVISIONER, CHROOT]


@dataclass
class PackerRun:
    returncode: int
    output: str


def packer_exe() -> str:
    exe = shutil.which("packer")
    need(exe is not None, "packer is not installed (scripts/install.sh --test installs Debian's packer)")
    return str(exe)


def packer_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a build: no telemetry, no colour, and this venv's imagelint first in PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PACKER_")}
    env.update(
        {
            "CHECKPOINT_DISABLE": "1",
            "NO_COLOR": "1",
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        }
    )
    env.update(extra or {})
    return env


def packer(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> PackerRun:
    """Run ``packer ARGS`` in ``cwd``; stdout and stderr together, as a terminal would show them."""
    proc = subprocess.run(
        [packer_exe(), *args],
        cwd=cwd,
        env=packer_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    return PackerRun(proc.returncode, proc.stdout)


def build(template_dir: Path, *var_args: str, env: dict[str, str] | None = None) -> PackerRun:
    """``packer build -color=false [-var k=v ...] .`` in a template directory."""
    return packer("build", "-color=false", *var_args, ".", cwd=template_dir, env=env)


def hcl_string(value: str) -> str:
    """An HCL2 quoted string literal for ``value`` (refusing template sequences we would have to escape)."""
    if "${" in value or "%{" in value:
        raise ValueError(f"template sequence in {value!r}: escape it by hand")
    return json.dumps(value)


def hcl_list(values: list[str]) -> str:
    return "[\n" + "".join(f"    {hcl_string(v)},\n" for v in values) + "  ]"


def load_hcl(path: Path) -> dict[str, Any]:
    """A template as python-hcl2 sees it, with plain (unquoted) strings and no block markers."""
    import hcl2
    from hcl2 import SerializationOptions

    options = SerializationOptions(strip_string_quotes=True, explicit_blocks=False, with_comments=False)
    with path.open(encoding="utf-8") as fh:
        return hcl2.load(fh, serialization_options=options)


def variables(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: body for block in doc.get("variable", []) for name, body in block.items()}


def labelled(blocks: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """``[{"shell-local": {...}}, ...]`` as ``[("shell-local", {...}), ...]``, in template order."""
    return [(label, body) for block in blocks for label, body in block.items()]


def env_names(block: dict[str, Any]) -> dict[str, str]:
    """A provisioner's or post-processor's ``environment_vars`` as NAME -> value expression."""
    return dict(item.split("=", 1) for item in block.get("environment_vars", []))


def strip_packer_block(text: str) -> str:
    """The template without its ``packer { ... }`` block, which Packer 1.6.6 refuses (required_plugins)."""
    start = text.index("\npacker {") + 1
    end = text.index("\n}\n", start) + 3
    return text[:start] + text[end:]
