"""Screenshots for the docs site (docs/images/): the HTML report and the step summary of an audit of the
bundled faulty sample image, rendered by headless Chromium.

Usage, from the checkout: .venv/bin/python scripts/docs-screenshots.py [CHROMIUM]

The step summary is the Markdown `-f markdown` writes (what the Action appends to
$GITHUB_STEP_SUMMARY), rendered by Python-Markdown as the docs site renders Markdown: GitHub's own
rendering differs in style. The emoji of the severities need a colour emoji font (Debian:
fonts-noto-color-emoji). Each PNG is written to a temporary name and renamed into place.
"""

from __future__ import annotations

import html
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import markdown
import yaml

from imagelint.sampletree import build_tree

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"
WIDTH = 1280
STYLE = """body { font-family: sans-serif; font-size: 14px; margin: 24px; color: #1f2328; }
table { border-collapse: collapse; margin: 12px 0; } th, td { border: 1px solid #d0d7de; padding: 4px 8px; }
code { background: #eff1f3; padding: 1px 4px; border-radius: 4px; }"""


def audit(workdir: Path) -> tuple[Path, Path]:
    """The sample image's HTML report and Markdown summary (the audit fails: exit 1 is expected)."""
    spec = yaml.safe_load((ROOT / "examples" / "sample-image.yaml").read_text(encoding="utf-8"))
    image = Path("build") / "sample-image"  # relative to workdir: the path the reports print
    build_tree(workdir / image, spec["files"])
    report, summary = workdir / "report.html", workdir / "summary.md"
    command = [sys.executable, "-m", "imagelint", "audit", str(image)]
    command += ["-c", str(ROOT / "examples" / "sample.imagelint.yaml")]
    command += ["-f", f"html:{report}", "-f", f"markdown:{summary}"]
    proc = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    if proc.returncode != 1:
        sys.exit(f"the audit of the sample image exited {proc.returncode}, not 1: {proc.stderr.strip()}")
    return report, summary


def summary_page(summary: Path) -> Path:
    body = markdown.markdown(summary.read_text(encoding="utf-8"), extensions=["tables", "fenced_code"])
    page = summary.with_suffix(".html")
    title = html.escape("imagelint step summary")
    page.write_text(
        f"<!doctype html><meta charset=utf-8><title>{title}</title><style>{STYLE}</style>{body}",
        encoding="utf-8",
    )
    return page


def screenshot(chromium: str, page: Path, out: Path, height: int) -> None:
    tmp = out.with_name(f".{out.name}.tmp.png")
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={WIDTH},{height}",
            f"--screenshot={tmp}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    tmp.replace(out)
    print(f"{out.relative_to(ROOT)}: {page.name}")


def main() -> None:
    chromium = sys.argv[1] if len(sys.argv) > 1 else shutil.which("chromium") or "chromium"
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        report, summary = audit(Path(tmp))
        screenshot(chromium, report, IMAGES / "html-report.png", 1400)
        screenshot(chromium, summary_page(summary), IMAGES / "step-summary.png", 1000)


if __name__ == "__main__":
    main()
