"""Running Packer 1.6.6 as a user would, and reading the shipped HCL2 templates with python-hcl2.

A recipe is a directory: Packer loads every *.pkr.hcl in it (packer/ami-gate-delete's shared files are
symlinks to packer/ami-gate's), so the tests read the whole directory, each file with python-hcl2, merged.
"""

from __future__ import annotations

import json
import os
import re
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
AMI_GATE = PACKER_DIR / "ami-gate"
AMI_GATE_DELETE = PACKER_DIR / "ami-gate-delete"
PROVISIONER = PACKER_DIR / "provisioner"
CHROOT = PACKER_DIR / "chroot"
QEMU = PACKER_DIR / "qemu"
SHIPPED = [AMI_GATE, AMI_GATE_DELETE, PROVISIONER, CHROOT]
AMI_RECIPES = [AMI_GATE, AMI_GATE_DELETE]


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


def build(
    template_dir: Path, *var_args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> PackerRun:
    """``packer build -color=false [-var k=v ...] DIR``: by default ``.`` in the template directory;
    with ``cwd``, the directory as a path relative to ``cwd`` (``path.root`` is then that path)."""
    if cwd is None:
        return packer("build", "-color=false", *var_args, ".", cwd=template_dir, env=env)
    return packer("build", "-color=false", *var_args, str(template_dir.relative_to(cwd)), cwd=cwd, env=env)


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


def template_files(directory: Path) -> list[Path]:
    """The files Packer loads from a recipe directory, in its order (symlinks included)."""
    return sorted(p for p in directory.iterdir() if p.name.endswith(".pkr.hcl"))


def load_template(directory: Path) -> dict[str, Any]:
    """A recipe directory as Packer sees it: every *.pkr.hcl read with python-hcl2, their blocks merged
    (each top-level key's list of blocks, file after file)."""
    merged: dict[str, list[Any]] = {}
    for path in template_files(directory):
        for key, blocks in load_hcl(path).items():
            merged.setdefault(key, []).extend(blocks)
    return merged


def locals_of(doc: dict[str, Any]) -> dict[str, Any]:
    return {name: value for block in doc.get("locals", []) for name, value in block.items()}


def shell_local_steps(directory: Path) -> list[dict[str, Any]]:
    """The shell-local post-processors of a recipe's post-processor chain, in order (gate, share)."""
    (build_block,) = load_template(directory)["build"]
    (chain,) = build_block["post-processors"]
    return [body for label, body in labelled(chain["post-processor"]) if label == "shell-local"]


# How the AMI recipes run their shared scripts: the path is sh's $0, never spliced into the command.
SCRIPT_EXECUTE_COMMAND = ["/bin/sh", "-c", '{{.Vars}} /bin/sh "$0"', "{{.Script}}"]


def step_script(directory: Path, step: dict[str, Any]) -> Path:
    """The file a shell-local ``script = "${path.root}/NAME"`` runs, as a path in ``directory``."""
    script = step["script"]
    assert script.startswith("${path.root}/") and "/" not in script.removeprefix("${path.root}/"), script
    assert step["execute_command"] == SCRIPT_EXECUTE_COMMAND, step["execute_command"]
    assert "inline" not in step
    return directory / script.removeprefix("${path.root}/")


def gate_env(**values: str) -> dict[str, str]:
    """The environment both AMI templates give imagelint-ami-gate.sh, with test values: no AMI to find
    yet (set IMAGELINT_MANIFEST or IMAGELINT_BUILD_ID), no soak, the offline gate off (``values``
    override)."""
    return {
        "IMAGELINT": str(VENV_BIN / "imagelint"),
        "IMAGELINT_MANIFEST": "",
        "IMAGELINT_BUILD_ID": "",
        "IMAGELINT_AWS": "aws",
        "IMAGELINT_REGION": "us-east-1",
        "IMAGELINT_KEEP_INCONCLUSIVE": "false",
        "IMAGELINT_FAIL_ON": "medium",
        "IMAGELINT_CONFIG": "",
        "IMAGELINT_SOAK_DURATION": "0",
        "IMAGELINT_VERSION": "",
        "IMAGELINT_INSTANCE_PROFILE": "",
        "IMAGELINT_REPORT_BUCKET": "",
        "IMAGELINT_EXTRA_ARGS": "--poll 0.2s",
        "IMAGELINT_OFFLINE_MODE": "none",
        **values,
    }


def script_reads(path: Path) -> set[str]:
    """The IMAGELINT* environment variables a shell script reads."""
    return set(re.findall(r"\$\{?(IMAGELINT\w*)", path.read_text(encoding="utf-8")))


def run_script(
    path: Path, env: dict[str, str], *, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run a shipped shell script under dash (POSIX sh, as Debian's /bin/sh), as shell-local does."""
    dash = shutil.which("dash")
    need(dash is not None, "dash is not installed")
    return subprocess.run(
        [str(dash), str(path)], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


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


def copy_for_packer_1_6_6(dest: Path) -> Path:
    """A copy of packer/ at ``dest`` (symlinks kept as symlinks) that Packer 1.6.6 loads: the
    ``packer {}`` block removed from every regular file that has one. Returns ``dest``."""
    shutil.copytree(PACKER_DIR, dest, symlinks=True)
    for path in dest.rglob("*.pkr.hcl"):
        if path.is_symlink():
            continue  # its target, a regular file of the copy, is rewritten itself
        text = path.read_text(encoding="utf-8")
        if "\npacker {" in text:
            path.write_text(strip_packer_block(text), encoding="utf-8")
    return dest
