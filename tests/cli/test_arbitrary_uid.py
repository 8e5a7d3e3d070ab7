"""Every command as a container's arbitrary uid: no passwd entry, no HOME, no XDG directories. The
caches are off with one warning line and the command does its work (before, the rule-pack cache's
Path.home() made every rule-running command an "internal error: RuntimeError")."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.formats.ci_helpers import sample_image
from tests.support import is_root, need, os_root

UID = 54321  # no passwd entry on any machine these tests run on (checked below)
CACHES_OFF = "imagelint: warning: caches off: no usable home directory for uid"


@pytest.fixture(scope="module")
def shared() -> Iterator[Path]:
    """Trees the dropped uid may read (pytest's tmp_path is root's alone), and a directory it may write."""
    d = Path(tempfile.mkdtemp(prefix="imagelint-uid-"))
    d.chmod(0o755)
    try:
        sample_image(d / "faulty")
        os_root(d / "clean")
        out = d / "out"
        out.mkdir()
        out.chmod(0o777)
        from tests.bundle.support import collect_soak_bundle

        collect_soak_bundle(d / "soak")
        subprocess.run(["chmod", "-R", "a+rX", str(d)], check=True)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _bundle(shared: Path) -> Path:
    return next((shared / "soak").glob("bundle.tar*"))


COMMANDS: dict[str, tuple[list[str], int | None]] = {  # None: as the same command run as root
    "audit": (["audit", "{faulty}"], 1),
    "audit -f json": (["audit", "{clean}", "-f", "json:{out}/report.json"], 0),
    "units": (["units", "{faulty}"], 0),
    "diff": (["diff", "{clean}", "{faulty}"], 1),
    "fix": (["fix", "{faulty}"], 0),
    "soak --from-bundle": (["soak", "--from-bundle", "{bundle}"], None),
    "rules list": (["rules", "list"], 0),
    "rules validate": (["rules", "validate", "{repo}/rules"], 0),
    "schema config": (["schema", "config"], 0),
    "collector": (["collector", "{out}/gate"], 0),
    "completion": (["completion", "bash"], 0),
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_works_as_an_arbitrary_uid_without_a_home(shared: Path, name: str) -> None:
    need(is_root(), "drops to an arbitrary uid with setpriv")
    need(shutil.which("setpriv") is not None, "setpriv is not installed (util-linux)")
    import pwd

    with pytest.raises(KeyError):
        pwd.getpwuid(UID)
    args, code = COMMANDS[name]
    values = {
        "faulty": shared / "faulty",
        "clean": shared / "clean",
        "out": shared / "out",
        "bundle": _bundle(shared),
        "repo": Path(__file__).resolve().parents[2],
    }
    argv = [a.format(**{k: str(v) for k, v in values.items()}) for a in args]
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HOME", "IMAGELINT_NO_CACHE") and not k.startswith("XDG_")
    }
    exe = Path(sys.executable).parent / "imagelint"
    proc = subprocess.run(
        ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", str(exe), *argv],
        capture_output=True, text=True, timeout=300, check=False, cwd=shared / "out",
        env={**env, "NO_COLOR": "1"},
    )  # fmt: skip
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    if code is None:
        as_root = subprocess.run(
            [str(exe), *argv], capture_output=True, text=True, timeout=300, check=False,
            env={**env, "NO_COLOR": "1", "IMAGELINT_NO_CACHE": "1"},
        )  # fmt: skip
        code = as_root.returncode
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    warnings = [line for line in proc.stderr.splitlines() if "caches off" in line]
    assert len(warnings) <= 1, proc.stderr
    assert all(w.startswith(CACHES_OFF) for w in warnings), warnings
    if name.startswith("audit"):  # the rule packs' cache was asked, and said no once
        assert len(warnings) == 1, proc.stderr
