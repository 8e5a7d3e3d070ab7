"""The real renderers of our pictures: Debian's Chromium, and the Mermaid CLI (npm) driving it.

The Mermaid CLI is installed once per machine under ``~/.cache/imagelint-tests/mermaid-cli-VERSION``
(``PUPPETEER_SKIP_DOWNLOAD=1 npm install`` into a temporary directory renamed into place, under a
lock), and told to use ``/usr/bin/chromium`` through a puppeteer config file. ``scripts/install.sh
--test`` installs the ``chromium`` and ``npm`` packages and warms this cache (``python -m
tests.formats.browsers``). Chromium runs headless with the background-networking flags (without them
it waits on the network, which this closed one never answers) and a fresh profile each time.

``png_ink`` checks a screenshot is not blank: the share of pixels that differ from the corner's
colour, decoded with zlib (no imaging library needed).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

MERMAID_CLI = "11.17.0"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _cache_base() -> Path:
    xdg = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return Path(os.environ.get("IMAGELINT_TEST_CACHE", xdg / "imagelint-tests"))


def mermaid_cli() -> Path | None:
    """The ``mmdc`` executable of the pinned Mermaid CLI, installed on first use; None without npm."""
    base = _cache_base()
    final = base / f"mermaid-cli-{MERMAID_CLI}"
    mmdc = final / "node_modules" / ".bin" / "mmdc"
    if mmdc.exists():
        return mmdc
    if shutil.which("npm") is None:
        return None
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f"mermaid-cli-{MERMAID_CLI}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if mmdc.exists():
            return mmdc
        tmp = Path(tempfile.mkdtemp(prefix=".mermaid-cli.", dir=base))
        try:
            subprocess.run(
                [
                    "npm",
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--prefix",
                    str(tmp),
                    f"@mermaid-js/mermaid-cli@{MERMAID_CLI}",
                ],
                check=True,
                capture_output=True,
                env={**os.environ, "PUPPETEER_SKIP_DOWNLOAD": "1"},
                timeout=900,
            )
            os.rename(tmp, final)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            return None
        finally:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(tmp)
    return mmdc


def render_mermaid(
    mmdc: Path, source: Path, out: Path, work: Path, kind: str
) -> subprocess.CompletedProcess[str]:
    """``mmdc -i source -o out -e kind``: a Markdown source has every block drawn as ``out``-N.``kind``."""
    config = work / "puppeteer.json"
    config.write_text(json.dumps({"executablePath": str(CHROMIUM), "args": CHROMIUM_FLAGS[1:]}))
    env = {**os.environ, "HOME": str(work)}  # puppeteer's and Chromium's own files stay in the test's dir
    return subprocess.run(
        [str(mmdc), "-q", "-p", str(config), "-i", str(source), "-o", str(out), "-e", kind, "-b", "white"],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


def chromium(page: Path | str, work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium on ``page`` (a file, or a URL), a fresh profile under ``work`` (``--dump-dom``,
    ``--screenshot=``)."""
    profile = Path(tempfile.mkdtemp(prefix="chromium-profile.", dir=work))
    url = page.as_uri() if isinstance(page, Path) else page
    return subprocess.run(
        [str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, url],
        capture_output=True,
        text=True,
        timeout=180,
    )


def screenshot(
    page: Path | str, work: Path, size: str = "900,1600", shot: Path | None = None
) -> tuple[Path, list[str]]:
    """A PNG of ``page`` (beside it, or ``shot``) and what the page wrote to its console: its errors,
    uncaught exceptions and Content-Security-Policy refusals, one line each."""
    shot = shot or Path(str(page)).with_suffix(".png")
    logging = ("--enable-logging=stderr", "--v=0")
    proc = chromium(page, work, f"--screenshot={shot}", f"--window-size={size}", *logging)
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    return shot, [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]


def png_ink(path: Path) -> float:
    """The share of a PNG's pixels whose colour differs from its top-left pixel's (8-bit RGB/RGBA only)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6), f"unexpected PNG kind depth={depth} colour={colour}"
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    rows: list[bytearray] = []
    prev = bytearray(stride)
    for y in range(height):
        filt, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if filt == 1:
                line[i] = (line[i] + a) & 0xFF
            elif filt == 2:
                line[i] = (line[i] + b) & 0xFF
            elif filt == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif filt == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(line)
        prev = line
    corner = bytes(rows[0][:3])
    ink = sum(1 for row in rows for x in range(0, stride, bpp) if bytes(row[x : x + 3]) != corner)
    return ink / (width * height)


if __name__ == "__main__":  # scripts/install.sh --test: warm the cache
    print(mermaid_cli() or "npm not found: the Mermaid CLI is not installed")
