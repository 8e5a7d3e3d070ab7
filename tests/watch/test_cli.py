"""`imagelint watch` at the CLI: prometheus-client stays lazy, and its absence is one clear line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from imagelint.errors import extra_hint
from tests.support import run_cli

BLOCK = (
    "import sys, importlib.abc\n"
    "class Block(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'prometheus_client' or name.startswith('prometheus_client.'):\n"
    "            raise ModuleNotFoundError(name)\n"
    "        return None\n"
)


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)


def test_other_commands_and_watch_help_do_not_import_prometheus_client(tmp_path: Path) -> None:
    code = (
        "import sys\nsys.argv = ['imagelint', *sys.argv[1:]]\n"
        "from imagelint.cli import dispatch\ndispatch()  # in this process: main() would fork\n"
        "print('prometheus_client' in sys.modules, file=sys.stderr)\n"
    )
    for args in (["rules", "list"], ["watch", "--help"], ["--help"]):
        proc = _run(code, *args)
        assert proc.stderr.strip().splitlines()[-1] == "False", (args, proc.stderr)


def test_without_prometheus_client_the_watch_says_how_to_get_it(tmp_path: Path) -> None:
    code = BLOCK + (
        "sys.meta_path.insert(0, Block())\n"
        "sys.argv = ['imagelint', 'watch', '--listen=127.0.0.1:1']\n"
        "from imagelint.cli import main\nmain()\n"
    )
    proc = _run(code)
    assert proc.returncode == 2
    expected = "imagelint: error: watch: --listen and --textfile need prometheus-client: "
    assert proc.stderr.strip().splitlines() == [expected + extra_hint("watch")]


def test_watch_has_standalone_help() -> None:
    proc = run_cli("watch", "--help")
    assert proc.returncode == 0 and "Usage: imagelint watch" in proc.stdout
    assert "imagelint watch --listen 0.0.0.0:9847" in proc.stdout and "Exit codes" in proc.stdout
