"""Screenshots for the docs site (docs/images/): the HTML report and the step summary of an audit of the
bundled faulty sample image, rendered by headless Chromium.

Usage, from the checkout (``make docs`` runs the first):
    .venv/bin/python scripts/docs-screenshots.py [--chromium PATH]   # rewrite the pictures
    .venv/bin/python scripts/docs-screenshots.py --check             # exit 1 when they are stale

The step summary is the Markdown `-f markdown` writes (what the Action appends to
$GITHUB_STEP_SUMMARY), rendered by markdown-it (CommonMark with GFM tables and raw HTML, the syntax
GitHub renders); GitHub's own style differs. The emoji of the severities need a colour emoji font (Debian:
fonts-noto-color-emoji).

What the pictures show is pinned so that they change only when an output changes: the sample's waiver
never expires in them (as in the snapshot tests), and the image is named ``build/sample-image`` (what
``make demo`` audits), not the temporary directory it was built in. Each picture is taken at the full
height of its page (never cut mid-row), written to a temporary name and renamed into place.
``docs/images/pictures.json`` records the SHA-256 of the HTML and Markdown each picture was taken of;
``--check`` renders them again (no browser needed) and compares: a format change that leaves a
picture stale fails ``tests/scripts/test_docs_screenshots.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from markdown_it import MarkdownIt

from imagelint.sampletree import build_image

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"
DIGESTS = IMAGES / "pictures.json"
WIDTH = 1280
MAX_HEIGHT = 8000
SHOWN_AS = "build/sample-image"
STYLE = """body { font-family: sans-serif; font-size: 14px; margin: 24px; color: #1f2328; }
table { border-collapse: collapse; margin: 12px 0; } th, td { border: 1px solid #d0d7de; padding: 4px 8px; }
code { background: #eff1f3; padding: 1px 4px; border-radius: 4px; }"""
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"]
CHROMIUM_FLAGS += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]


def sources(workdir: Path) -> dict[str, str]:
    """{picture name: the page it shows}: the sample image's HTML report and its step summary (as HTML)."""
    spec = yaml.safe_load((ROOT / "examples" / "sample-image.yaml").read_text(encoding="utf-8"))
    image = workdir / "build" / "sample-image"
    build_image(image, spec["files"])
    config = workdir / "sample.imagelint.yaml"
    sample_config = (ROOT / "examples" / "sample.imagelint.yaml").read_text(encoding="utf-8")
    config.write_text(re.sub(r"expires: \S+", "expires: 2999-12-31", sample_config), encoding="utf-8")
    report, summary = workdir / "report.html", workdir / "summary.md"
    command = [sys.executable, "-m", "imagelint", "audit", str(image.relative_to(workdir)), "-c", str(config)]
    command += ["-f", f"html:{report}", "-f", f"markdown:{summary}"]
    proc = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    if proc.returncode != 1:
        sys.exit(f"the audit of the sample image exited {proc.returncode}, not 1: {proc.stderr.strip()}")

    def shown(text: str) -> str:
        for path in sorted({str(image), str(image.resolve())}, key=len, reverse=True):
            text = text.replace(path, SHOWN_AS)
        return text

    body = MarkdownIt("commonmark").enable("table").render(shown(summary.read_text(encoding="utf-8")))
    head = f"<!doctype html><meta charset=utf-8><title>{html.escape('imagelint step summary')}</title>"
    return {
        "html-report.png": shown(report.read_text(encoding="utf-8")),
        "step-summary.png": f"{head}<style>{STYLE}</style>{body}",
    }


def digest(page: str) -> str:
    return hashlib.sha256(page.encode("utf-8")).hexdigest()


def chromium(binary: str, page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="chromium-profile.") as profile:
        return subprocess.run(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
            check=True,
            capture_output=True,
            text=True,
            timeout=180,
        )


def page_height(binary: str, page: Path) -> int:
    """The page's full height in pixels, as Chromium lays it out at WIDTH: a script in a copy of the
    page (without the report's Content-Security-Policy, which forbids scripts) writes it into the DOM,
    which ``--dump-dom`` prints."""
    probe = page.with_name(f"height-{page.name}")
    script = "<script>document.body.dataset.h=document.documentElement.scrollHeight</script>"
    text = re.sub(r"<meta http-equiv=.Content-Security-Policy[^>]*>", "", page.read_text(encoding="utf-8"))
    probe.write_text(text.replace("</body>", script + "</body>") if "</body>" in text else text + script)
    dom = chromium(binary, probe, f"--window-size={WIDTH},800", "--dump-dom").stdout
    found = re.search(r'data-h="(\d+)"', dom)
    if found is None:
        sys.exit(f"could not measure {page.name}'s height in Chromium")
    return min(int(found.group(1)) + 24, MAX_HEIGHT)


def screenshot(binary: str, page: Path, out: Path) -> None:
    tmp = out.with_name(f".{out.name}.tmp.png")
    chromium(binary, page, f"--window-size={WIDTH},{page_height(binary, page)}", f"--screenshot={tmp}")
    tmp.replace(out)
    print(f"{out.relative_to(ROOT)}: {page.name}")


def write_digests(pages: dict[str, str]) -> None:
    tmp = DIGESTS.with_name(f".{DIGESTS.name}.tmp")
    tmp.write_text(json.dumps({name: digest(page) for name, page in pages.items()}, indent=2) + "\n")
    tmp.replace(DIGESTS)


def stale(pages: dict[str, str], digests: Path) -> list[str]:
    """The pictures whose page changed since they were taken (all of them without a digest file)."""
    try:
        recorded = json.loads(digests.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        recorded = {}
    return [name for name, page in pages.items() if recorded.get(name) != digest(page)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a picture is stale; take none")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    parser.add_argument(
        "--digests", type=Path, default=DIGESTS, help="with --check: the digest file to check"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pages = sources(Path(tmp))
        if args.check:
            old = stale(pages, args.digests)
            if old:
                sys.exit(
                    f"stale docs pictures: {', '.join(old)}: run make docs (scripts/docs-screenshots.py)"
                )
            print("docs pictures are current")
            return
        IMAGES.mkdir(parents=True, exist_ok=True)
        for name, page in pages.items():
            source = Path(tmp) / f"{Path(name).stem}.html"
            source.write_text(page, encoding="utf-8")
            screenshot(args.chromium, source, IMAGES / name)
        write_digests(pages)


if __name__ == "__main__":
    main()
