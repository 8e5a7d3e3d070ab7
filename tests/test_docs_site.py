"""The docs site: `mkdocs build --strict` builds it (a broken link fails), every command, option and
config key is documented in a hand-written page, and the README is a landing page that links into it."""

from __future__ import annotations

import functools
import http.server
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from imagelint.cli.app import load_commands
from imagelint.config import config_schema
from imagelint.docs import PAGES
from tests.support import REPO, need

app = load_commands()  # every command, as the root's help lists them

SNIPPET = re.compile(r'^--8<-- "([^":]+)(?::[\w-]+)?"$', re.M)
# what the site's snippets include besides docs/ (mkdocs.yml: pymdownx.snippets, base_path ".")
SNIPPET_SOURCES = ["README.md", "CONTRIBUTING.md", "packer", "examples", "deploy"]


def _hand_written() -> str:
    """Every page of docs/ but the generated ones, with the files its snippets include."""
    texts = []
    for page in sorted((REPO / "docs").rglob("*.md")):
        if page.relative_to(REPO).as_posix() in PAGES:
            continue
        text = page.read_text(encoding="utf-8")
        texts.append(text)
        texts += [(REPO / path).read_text(encoding="utf-8") for path in SNIPPET.findall(text)]
    return "\n".join(texts)


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def _options() -> dict[str, list[str]]:
    """Every long option of the CLI → the commands that take it."""
    found: dict[str, list[str]] = {}
    for path, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            if getattr(param, "param_type_name", "") != "option":
                continue
            for flag in [*param.opts, *param.secondary_opts]:
                if flag.startswith("--"):
                    found.setdefault(flag, []).append(" ".join(("imagelint", *path)))
    return found


def _config_keys(schema: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for key, spec in schema.get("properties", {}).items():
        yield prefix + key
        yield from _config_keys(spec, f"{prefix}{key}.")
    for name, spec in schema.get("$defs", {}).items():
        yield from _config_keys(spec, f"{prefix}{name}s[].")


def test_every_command_is_documented() -> None:
    docs = _hand_written()
    paths = [" ".join(("imagelint", *path)) for path, _ in _commands(typer.main.get_command(app)) if path]
    assert len(paths) > 15
    assert [p for p in paths if p not in docs] == []


def test_every_option_is_documented() -> None:
    docs = _hand_written()
    options = _options()
    assert {"--fail-on", "--no-github", "--npd-state", "--create-profile", "--version"} <= set(options)
    missing = {
        flag: commands
        for flag, commands in options.items()
        if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", docs)
    }
    assert missing == {}


def test_every_config_key_is_documented() -> None:
    docs = _hand_written()
    keys = list(_config_keys(config_schema()))
    assert {"fail-on", "diff.allow-units", "waivers[].expires"} <= set(keys)

    # as YAML (`key:`, `- key:`) or as code (`key`, `diff.key`) in a hand-written page
    def mentioned(key: str) -> bool:
        name = re.escape(key.split(".")[-1])
        return re.search(rf"^[ \t]*(- )?{name}:|`{name}[`:]", docs, re.M) is not None

    missing = [key for key in keys if not mentioned(key)]
    assert missing == []


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(site.parent)},
        timeout=300,
    )


def test_the_site_builds_strict_with_its_snippets(tmp_path: Path) -> None:
    proc = _build(REPO, tmp_path / "site")
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    packer = (tmp_path / "site" / "packer" / "index.html").read_text(encoding="utf-8")
    assert "imagelint audit output/disk.qcow2" in packer  # a recipe, included as it is in packer/
    start = (tmp_path / "site" / "getting-started" / "index.html").read_text(encoding="utf-8")
    assert "Set-up: the two commands" in start  # the README's section, included
    fix = (tmp_path / "site" / "fix" / "index.html").read_text(encoding="utf-8")
    assert 'href="https://github.com/imagelint/imagelint/edit/main/docs/fix.md"' in fix  # edit this page
    assert 'href="https://github.com/imagelint/imagelint"' in fix  # the repository, in the header


def test_a_page_of_the_site_renders_in_chromium(tmp_path: Path) -> None:
    from tests.formats import browsers

    need(browsers.CHROMIUM.exists(), "Debian's chromium is not installed (scripts/install.sh --test)")
    site = tmp_path / "site"
    assert _build(REPO, site).returncode == 0
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)  # Material needs http://, not file://
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/github-actions/"
        shot, console = browsers.screenshot(url, tmp_path, "1280,1600", tmp_path / "github-actions.png")
    finally:
        server.shutdown()
    assert console == [], console  # no script error, nothing refused
    assert browsers.png_ink(shot) > 0.02, f"{shot} is blank"


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    root.mkdir()
    shutil.copy(REPO / "mkdocs.yml", root)
    shutil.copytree(REPO / "docs", root / "docs")
    for source in SNIPPET_SOURCES:
        src = REPO / source
        if src.is_dir():
            shutil.copytree(src, root / source, symlinks=True)
        else:
            shutil.copy(src, root / source)
    assert _build(root, tmp_path / "site").returncode == 0
    with (root / "docs" / "fix.md").open("a", encoding="utf-8") as page:
        page.write("\nSee [nowhere](no-such-page.md).\n")
    proc = _build(root, tmp_path / "site")
    assert proc.returncode == 1
    assert "no-such-page.md" in proc.stderr


def test_the_readme_is_a_landing_page_linking_into_the_site() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    setup = readme.split("## Set-up: the two commands\n", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"^make demo  ", setup, re.M) and re.search(r"^make test  ", setup, re.M)
    # absolute: the README is also the package's page on an index, where a relative link leads nowhere
    assert re.findall(r"\]\((?!https?://|#)([^)]+)\)", readme) == []
    base = "https://github.com/imagelint/imagelint/blob/main/"
    links = [link.split("#")[0] for link in re.findall(r"\]\(" + re.escape(base) + r"([^)]+)\)", readme)]
    assert sum(link.startswith("docs/") for link in links) >= 10
    assert [link for link in links if not (REPO / link).exists()] == []


@pytest.mark.parametrize("page", ["hosts-over-ssh.md", "github-actions.md", "packer.md", "aws.md"])
def test_the_nav_has_the_task_pages(page: str) -> None:
    assert f": {page}" in (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert (REPO / "docs" / page).is_file()
