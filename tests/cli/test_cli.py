"""The command line as users meet it: exit codes, one-line errors, formats, start-up cost."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from imagelint import __version__
from imagelint.report.schema import report_schema
from tests.support import REPO, os_root, run_cli


def test_version() -> None:
    for args in (["--version"], ["-V"]):
        proc = run_cli(*args)
        assert (proc.returncode, proc.stdout) == (0, f"imagelint {__version__}\n")
    module = subprocess.run([sys.executable, "-m", "imagelint", "--version"], capture_output=True, text=True)
    assert module.stdout == f"imagelint {__version__}\n"


def test_version_imports_nothing_beyond_the_interpreter_start() -> None:
    """``--version`` is answered before typer, rich, the traceback module or any other command's."""
    code = (
        "import sys\nbefore = set(sys.modules)\n"
        "from imagelint.cli import main\nsys.argv = ['imagelint', '--version']\nmain()\n"
        "print(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    imported = set(proc.stdout.splitlines()[-1].split())
    assert imported <= {"__future__", "imagelint", "imagelint.cli"}, proc.stdout


def test_a_command_runs_with_the_young_collection_threshold_raised() -> None:
    """``main`` raises the cyclic collector's young threshold before it forks the boxed command,
    which inherits it; a bare interpreter keeps CPython's default."""
    from imagelint.cli import GC_YOUNG_THRESHOLD

    code = (
        "import gc, sys\nfrom imagelint.cli import main\nprint('BEFORE', gc.get_threshold()[0])\n"
        "sys.argv = ['imagelint', 'rules', 'list']\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('AFTER', gc.get_threshold()[0])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    said = dict(line.split() for line in proc.stdout.splitlines() if line.startswith(("BEFORE", "AFTER")))
    assert said == {"BEFORE": "700", "AFTER": str(GC_YOUNG_THRESHOLD)}, proc.stdout[-500:]


def _loaded_by(
    args: list[str], modules: tuple[str, ...], *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> list[str]:
    """Which of ``modules`` an imagelint command line has imported when it is done (run through
    ``dispatch`` in a fresh interpreter: ``main()`` would fork)."""
    code = (
        "import json, sys\nmodules = json.loads(sys.argv[2])\n"
        "sys.argv = ['imagelint', *json.loads(sys.argv[1])]\n"
        "from imagelint.cli import dispatch\ndispatch()\n"
        "loaded = [m for m in modules if m in sys.modules]\n"
        "print('LOADED', json.dumps(loaded), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(args), json.dumps(modules)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=cwd,
    )
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("LOADED "), proc.stderr
    loaded: list[str] = json.loads(last.removeprefix("LOADED "))
    return loaded


def test_audit_does_not_import_heavy_modules(tmp_path: Path) -> None:
    root = os_root(tmp_path / "image", {"/etc/hostname": "x\n"})
    heavy = ("boto3", "botocore", "moto", "urllib3", "dissect")
    assert _loaded_by(["audit", str(root), "-f", "json:/dev/null"], heavy) == []


def test_an_offline_audit_imports_no_other_command(tmp_path: Path) -> None:
    """An offline audit imports neither another command's CLI module (registered only when the command
    line may run it) nor what they run: AWS, the VM, the ssh transport, the soak, watch, the parser of
    ``systemctl show`` counters or of /proc/stat."""
    root = os_root(tmp_path / "image", {"/etc/hostname": "x\n"})
    others = tuple(f"imagelint.cli.{m}" for m in ("aws", "diff", "fix", "vm", "watch"))
    runs = ("imagelint.aws", "imagelint.vm", "imagelint.collector.ssh.transport", "imagelint.soak")
    runs += ("imagelint.watch", "imagelint.commands.ami", "imagelint.commands.fleet")
    runs += ("imagelint.facts.systemd.show", "imagelint.facts.cpustat")
    assert _loaded_by(["audit", str(root), "-f", "json:/dev/null"], (*others, *runs)) == []


def test_the_root_help_registers_every_command_module() -> None:
    modules = tuple(f"imagelint.cli.{m}" for m in ("aws", "diff", "fix", "vm", "watch"))
    assert _loaded_by(["--help"], modules) == list(modules)
    assert _loaded_by(["schema", "--help"], modules) == ["imagelint.cli.diff"]


def test_an_audit_of_an_image_without_a_journal_loads_no_journal_analysis(tmp_path: Path) -> None:
    """facts.journal's names are imported on first use, and the journal kinds ask for their analysis
    only once a journal was found: an image without one never loads the analyses (and their compiled
    kernel wordings)."""
    root = os_root(tmp_path / "image", {"/etc/hostname": "x\n", "/var/log/journal/README": "x\n"})
    analyses = tuple(f"imagelint.facts.journal.{m}" for m in ("ena", "restarts", "signals", "reader"))
    loaded = _loaded_by(["audit", str(root), "-f", "json:/dev/null"], ("imagelint.facts.journal", *analyses))
    assert loaded == ["imagelint.facts.journal"]


def test_an_audit_of_a_dpkg_image_imports_no_rpmdb_reader(tmp_path: Path) -> None:
    """sqlite3 and tempfile are imported where an rpmdb is read (facts/packages.py) or an ssh host
    is collected from (openers/ssh.py), not by every audit."""
    status = "Package: a\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1\n"
    root = os_root(tmp_path / "image", {"/etc/hostname": "x\n", "/var/lib/dpkg/status": status})
    assert _loaded_by(["audit", str(root), "-f", "json:/dev/null"], ("sqlite3", "tempfile")) == []


def test_an_audit_with_kept_packs_and_no_config_parses_no_yaml(tmp_path: Path) -> None:
    """yamlsource's docstring: PyYAML is imported only when a file is parsed. The first audit loads
    the built-in packs and keeps them (rulepacks.cache); the second, with no config file, parses none."""
    root = os_root(tmp_path / "image", {"/etc/hostname": "x\n"})
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("IMAGELINT_NO_CACHE", None)
    args = ["audit", str(root), "-f", "json:/dev/null"]
    runs = [_loaded_by(args, ("yaml", "jsonschema"), env=env, cwd=tmp_path) for _ in range(2)]
    assert runs == [["yaml", "jsonschema"], []]


def test_an_audit_with_kept_packs_imports_no_random_number_generator(tmp_path: Path) -> None:
    """Temporary names and the cache key are os.urandom's (as the secrets module makes them): importing
    secrets imports random, which seeds a generator, for every run."""
    root = os_root(tmp_path / "image", {"/etc/hostname": "x\n"})
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("IMAGELINT_NO_CACHE", None)
    args = ["audit", str(root), "-f", f"json:{tmp_path / 'report.json'}"]
    runs = [_loaded_by(args, ("secrets", "random"), env=env, cwd=tmp_path) for _ in range(2)]
    assert runs[1] == []


def test_units_imports_neither_the_rule_engine_nor_the_bundle_reader(tmp_path: Path) -> None:
    """``imagelint units`` (commands/units.py's docstring): no rule packs, YAML, jsonschema, check
    kinds, engine or bundle reader are imported to list a directory's units."""
    root = os_root(tmp_path / "image", {"/etc/hostname": "x\n"})
    heavy = (
        "yaml",
        "jsonschema",
        "imagelint.rulepacks.loader",
        "imagelint.checks",
        "imagelint.engine",
        "imagelint.session",
        "imagelint.config",
        "imagelint.bundle.run",
    )
    assert _loaded_by(["units", str(root)], heavy) == []


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_bad_root_is_one_line_and_exit_3(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "nope"
    if kind == "file":
        root.write_text("")
    proc = run_cli("audit", str(root))
    # a file is read as a disk image (imagelint.targets.disk): an empty one is none
    reason = "image root does not exist" if kind == "missing" else "too small to be a disk image (0 bytes)"
    assert proc.returncode == 3
    assert proc.stderr == f"imagelint: error: {root}: {reason}\n"


def test_huge_file_in_the_image_is_inconclusive_with_its_path(tmp_path: Path) -> None:
    root = os_root(tmp_path / "image", {"/etc/ssh/sshd_config": ""})
    with open(root / "etc/ssh/sshd_config", "wb") as f:
        f.truncate(2 * 1024**3)
    proc = run_cli("audit", str(root), "--select", "IL110")
    assert proc.returncode == 3
    assert "/etc/ssh/sshd_config: is 2.0 GiB, over the 16.0 MiB read limit" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_fifo_where_a_file_should_be_is_inconclusive(tmp_path: Path) -> None:
    root = os_root(tmp_path / "image", {})
    os.mkfifo(root / "etc/machine-id")
    proc = run_cli("audit", str(root), "--select", "IL102", "-f", "json", timeout=30)
    report = json.loads(proc.stdout)
    assert proc.returncode == 3 and report["verdict"] == "inconclusive"
    assert report["errors"] == [
        {
            "message": "is a FIFO, not a regular file; not opened",
            "rule_id": "IL102",
            "where": "/etc/machine-id",
        }
    ]


def test_symlink_loop_in_the_image_is_inconclusive(tmp_path: Path) -> None:
    root = os_root(tmp_path / "image", {"/root/.ssh": {"link": "/root/.ssh"}})
    proc = run_cli("audit", str(root), "--select", "IL104")
    assert proc.returncode == 3 and "symlink loop" in proc.stdout


def test_absolute_link_to_shadow_is_read_inside_the_image(tmp_path: Path) -> None:
    root = os_root(
        tmp_path / "image",
        {"/etc/shadow": "root:*:1::::::\n", "/etc/machine-id": {"link": "/etc/shadow"}},
    )
    proc = run_cli("audit", str(root), "--select", "IL114,IL102", "-f", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the image's locked root, not the host's


def test_non_utf8_content_is_a_warning_and_still_matched(tmp_path: Path) -> None:
    root = os_root(tmp_path / "image", {})
    (root / "etc/ssh").mkdir(parents=True)
    (root / "etc/ssh/sshd_config").write_bytes(b"# caf\xe9\nPermitRootLogin yes\n")
    proc = run_cli("audit", str(root), "--select", "IL110", "-f", "json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["findings"][0]["line"] == 2
    assert report["warnings"] == [
        {
            "message": "not valid UTF-8 at byte 5; undecodable bytes were escaped",
            "rule_id": None,
            "where": "/etc/ssh/sshd_config",
        }
    ]


def test_json_report_matches_its_schema_and_text_goes_to_stdout(debian_rootfs: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli("audit", str(debian_rootfs), "-f", "text", "-f", f"json:{out}")
    report = json.loads(out.read_text())
    jsonschema.Draft202012Validator(report_schema(), format_checker=jsonschema.FormatChecker()).validate(
        report
    )
    assert proc.returncode == report["exit_code"] == 1
    assert "FAIL:" in proc.stdout and "IL101" in proc.stdout and "\x1b[" not in proc.stdout
    assert {p["name"] for p in report["rule_packs"]} >= {"core", "hygiene"}
    printed = json.loads(run_cli("schema", "report").stdout)
    assert printed == report_schema()


def test_two_formats_on_stdout_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli("audit", str(tmp_path), "-f", "text", "-f", "json")
    assert proc.returncode == 2 and "only one --format can go to stdout" in proc.stderr


def test_unknown_format_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli("audit", str(tmp_path), "-f", "xml")
    assert proc.returncode == 2 and "unknown format 'xml'" in proc.stderr


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = Path(dirpath, name)
            st = path.lstat()
            digest.update(
                f"{path.relative_to(root)}|{st.st_mode}|{st.st_uid}|{st.st_size}|{st.st_mtime_ns}".encode()
            )
            if path.is_file() and not path.is_symlink():
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def test_audit_never_writes_to_the_image(debian_rootfs: Path) -> None:
    before = _tree_digest(debian_rootfs)
    run_cli("audit", str(debian_rootfs), "-f", "json:/dev/null")
    assert _tree_digest(debian_rootfs) == before


def test_every_command_has_standalone_help() -> None:
    for args in (
        ["--help"],
        ["audit", "--help"],
        ["rules", "--help"],
        ["rules", "validate", "--help"],
        ["schema", "--help"],
        ["docs", "rules", "--help"],
    ):
        proc = run_cli(*args)
        assert proc.returncode == 0 and "Usage: imagelint" in proc.stdout, args
    assert "Exit codes" in run_cli("--help").stdout
    assert "imagelint audit /mnt/image" in run_cli("audit", "--help").stdout


def test_rule_reference_is_up_to_date() -> None:
    proc = run_cli("docs", "rules", "--check", "-o", str(REPO / "docs" / "rules.md"))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_bad_root_gives_the_same_exit_code_in_audit_and_units(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "nope"
    if kind == "file":
        root.write_text("")
    # a file is read as a disk image (imagelint.targets.disk): an empty one is none
    reason = "image root does not exist" if kind == "missing" else "too small to be a disk image (0 bytes)"
    for command in ("audit", "units"):
        proc = run_cli(command, str(root))
        assert (proc.returncode, proc.stderr) == (3, f"imagelint: error: {root}: {reason}\n"), command


def test_rules_list_has_a_header_and_is_ordered_by_id() -> None:
    proc = run_cli("rules", "list")
    assert proc.returncode == 0, proc.stderr
    header, *rows = proc.stdout.splitlines()
    assert header.split() == ["ID", "SEVERITY", "SCOPE", "NAME", "TITLE"]
    ids = [row.split()[0] for row in rows]
    assert len(ids) > 10 and ids == sorted(ids, key=lambda i: (i[:2], int(i[2:])))
    as_json = json.loads(run_cli("rules", "list", "-f", "json").stdout)
    assert [e["id"] for e in as_json] == ids
    assert json.loads(run_cli("rules", "list", "--json").stdout) == as_json  # the old spelling stays
    starts = {line.index(word) for line in (header, *rows) for word in line.split()[1:2]}
    assert len(starts) == 1, starts  # every row's second column starts where the header's does
    scope_at = header.index("SCOPE")
    assert {row.index(row.split()[2], scope_at - 1) for row in rows} == {scope_at}  # IL001's scopes too
