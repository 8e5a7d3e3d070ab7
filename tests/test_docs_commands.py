"""Every command the docs show runs as written, with the exit code the page states.

Each ``imagelint …`` line of a shell block (```` ```sh ````, ```` ```console ````) of the README and of
every hand-written page of the docs site is taken as it is written, continuation lines joined:

- **Run** when it needs nothing but an image on this machine: in a scratch directory holding the bundled
  sample image as ``build/sample-image`` (what ``make demo`` builds), a fresh copy of it wherever the page
  names a mounted image (``/mnt/image``, ``/mnt/candidate``, ``/mnt/last-release``), the repository's
  ``examples/`` and the writing-rules page's pack as ``my-rules.yaml``; a line with ``&&`` or ``>`` runs
  as the shell runs it. Its exit code must be the one the line's comment states (``exit 1``), else 0.
- **Parsed** when it needs a host, an AWS account, a disk image or the running system (``ssh://``,
  ``ebs:``, ``ami``, ``fleet``, ``watch``, ``soak``, ``--live``, ``--hosts``, ``.qcow2``…): the command
  line goes through the CLI's own parser (the command, its subcommand, every option and its value
  type), so an option the docs name and the CLI lacks fails here.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from imagelint.sampletree import build_image
from tests.support import REPO

HAND_WRITTEN = sorted(
    p for p in (REPO / "docs").glob("*.md") if p.name not in {"rules.md", "contributing.md"}
)
PAGES = [REPO / "README.md", *HAND_WRITTEN]
MOUNTS = ("/mnt/image", "/mnt/candidate", "/mnt/last-release")
NEEDS_MORE = re.compile(
    r"ssh://|ebs:|\bami\b|\bfleet\b|\bwatch\b|\bsoak\b|--live|--hosts|\.qcow2|\.vmdk|\.vhdx?\b|\.raw\b|\.img\b"
    r"|IMAGELINT_SSH_COMMAND|\bsudo\b"
)
SHELL_BLOCK = re.compile(r"^```(sh|console|bash|shell)\s*$")
EXIT = re.compile(r"\bexit (\d)\b")


@dataclass(frozen=True)
class DocCommand:
    page: str
    line: int
    text: str  # as written, without the prompt and the trailing comment
    comment: str

    @property
    def runnable(self) -> bool:
        return NEEDS_MORE.search(self.text) is None

    @property
    def expected_exit(self) -> int:
        found = EXIT.search(self.comment)
        return int(found.group(1)) if found else 0

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def doc_commands() -> list[DocCommand]:
    found: list[DocCommand] = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        in_shell = console = False
        number = 0
        while number < len(lines):
            line = lines[number]
            number += 1
            if line.startswith("```"):
                in_shell = not in_shell and SHELL_BLOCK.match(line) is not None
                console = line.strip() == "```console"
                continue
            start = number
            while in_shell and line.rstrip().endswith("\\") and number < len(lines):
                line = line.rstrip()[:-1] + " " + lines[number].strip()
                number += 1
            text = line.strip()
            if console:  # a console block: commands behind the prompt, the rest is their output
                if not text.startswith("$ "):
                    continue
                text = text.removeprefix("$ ")
            if not in_shell or not re.match(r"^(sudo )?imagelint ", text):
                continue
            code, _, comment = text.partition(" #")
            found.append(DocCommand(str(page.relative_to(REPO)), start, code.strip(), comment))
    return found


COMMANDS = doc_commands()


def test_the_docs_show_commands_of_both_kinds() -> None:
    assert sum(c.runnable for c in COMMANDS) >= 12, [str(c) for c in COMMANDS if c.runnable]
    assert sum(not c.runnable for c in COMMANDS) >= 20


def _parse(argv: list[str]) -> Any:
    """The CLI's own parser on ``argv``: the command reached (its context), or the parser's error."""
    import typer.main

    from imagelint.cli.app import load_commands

    app = load_commands()
    command: Any = typer.main.get_command(app)
    name, args, parent = "imagelint", argv, None
    while True:
        ctx = command.make_context(name, args, parent=parent, resilient_parsing=False)
        if not hasattr(command, "resolve_command"):
            return ctx
        name, command, args = command.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        parent = ctx


@pytest.mark.parametrize("command", [c for c in COMMANDS if not c.runnable], ids=str)
def test_a_command_that_needs_a_host_or_an_account_parses(command: DocCommand) -> None:
    words = shlex.split(re.split(r"\s(?:>|\||&&)\s", command.text)[0])  # the command, not the shell's part
    argv = words[words.index("imagelint") + 1 :]
    if "…" in argv:  # "ami check AMI …": the page elides the rest on purpose
        argv = argv[: argv.index("…")]
    try:
        _parse(argv)
    except Exception as error:  # click's UsageError and friends (typer vendors click)
        message = error.format_message() if hasattr(error, "format_message") else str(error)
        pytest.fail(f"{command}: the CLI refuses it: {message}")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What every runnable command finds: the sample image, examples/, and the docs' rule pack."""
    work = tmp_path_factory.mktemp("docs-commands")
    spec = yaml.safe_load((REPO / "examples" / "sample-image.yaml").read_text(encoding="utf-8"))
    build_image(work / "sample", spec["files"])
    (work / "examples").symlink_to(REPO / "examples")
    page = (REPO / "docs" / "writing-rules.md").read_text(encoding="utf-8")
    pack = re.search(r"```yaml\n(pack:\n.*?)```", page, re.S)
    assert pack, "docs/writing-rules.md shows no rule pack"
    (work / "my-rules.yaml").write_text(pack.group(1), encoding="utf-8")
    return work


def _fresh(scratch: Path, name: str) -> Path:
    copy = scratch / "runs" / name
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(scratch / "sample", copy, symlinks=True)
    return copy


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.runnable], ids=str)
def test_a_local_command_runs_as_written_with_the_exit_code_the_page_states(
    command: DocCommand, scratch: Path, tmp_path: Path
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "examples").symlink_to(REPO / "examples")
    shutil.copy(scratch / "my-rules.yaml", cwd / "my-rules.yaml")
    (cwd / "build").mkdir()
    shutil.copytree(scratch / "sample", cwd / "build" / "sample-image", symlinks=True)
    text = command.text
    for mount in MOUNTS:
        if mount in text:
            text = text.replace(mount, str(_fresh(scratch, f"{tmp_path.name}{mount.replace('/', '-')}")))
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}", "NO_COLOR": "1"}
    proc = subprocess.run(
        ["bash", "-c", text],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == command.expected_exit, (
        f"{command}\nexited {proc.returncode}, the page says {command.expected_exit}\n{proc.stderr[-3000:]}"
    )
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
