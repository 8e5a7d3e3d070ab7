"""Decompression bombs in real journal files, and the peak memory of reading them.

``bomb_journal(kind, out_dir, size)`` writes a small real journal with ``systemd-journal-remote`` (a
kernel line whose MESSAGE is long enough to be stored compressed, among kubelet noise), then gives
that MESSAGE's DATA object a hostile payload that expands to ``size`` bytes (``MESSAGE=`` and
zeros), marking the file and the object with the payload's algorithm (``craft.relocate_data``):

* ``zstd``: one frame declaring its content size, as systemd writes them (about 60 KB for 1.5 GiB);
* ``zstd-undeclared``: a streamed frame without a content size, so the size is known only by decoding;
* ``xz``: an XZ stream;
* ``lz4``: systemd's LZ4 layout (8-byte little-endian size, then one block), the size honest;
* ``lz4-lying``: the same block behind a size prefix that claims just 16 MiB.

The LZ4 block is written by hand (one literal run, one long match at distance 1, a final literal
run), so no gigabyte ever has to exist in the building process; the others are compressed streams
fed with zeros chunk by chunk.

``peak_rss(directory)`` reads a journal directory in a fresh Python process through the public API
(every entry, the restart analysis, every built-in signal) and returns what it reported about the
files with the peak resident set size of its process tree (``peak_mib``, from :mod:`tests.treerss`).
"""

from __future__ import annotations

import functools
import json
import lzma
import os
import sys
from pathlib import Path

from tests.facts.journal.craft import (
    HEADER_COMPRESSED_LZ4,
    HEADER_COMPRESSED_XZ,
    HEADER_COMPRESSED_ZSTD,
    OBJECT_COMPRESSED_LZ4,
    OBJECT_COMPRESSED_XZ,
    OBJECT_COMPRESSED_ZSTD,
    OBJECT_DATA,
    JournalBytes,
)
from tests.facts.journal.exportgen import MACHINE_ID, Host, kubelet_line, write_journal
from tests.treerss import run_tree

KINDS = ("xz", "lz4", "zstd", "zstd-undeclared", "lz4-lying")
PREFIX = b"MESSAGE="
_CHUNK = 16 * 1024 * 1024
REPO = Path(__file__).resolve().parents[3]


def _zeros(size: int) -> list[bytes]:
    """``size`` zero bytes as chunks (the last one shorter), all sharing one buffer."""
    chunk = bytes(min(size, _CHUNK))
    full, rest = divmod(size, _CHUNK)
    return [chunk] * full + ([chunk[:rest]] if rest else [])


def zstd_bomb(size: int, *, declared: bool) -> bytes:
    import zstandard

    cctx = zstandard.ZstdCompressor(level=3, write_content_size=declared)
    cobj = cctx.compressobj(size=size if declared else -1)
    out = [cobj.compress(PREFIX)]
    out += [cobj.compress(c) for c in _zeros(size - len(PREFIX))]
    out.append(cobj.flush())
    return b"".join(out)


def xz_bomb(size: int) -> bytes:
    comp = lzma.LZMACompressor(format=lzma.FORMAT_XZ, preset=0)
    out = [comp.compress(PREFIX)]
    out += [comp.compress(c) for c in _zeros(size - len(PREFIX))]
    out.append(comp.flush())
    return b"".join(out)


def _lz4_length(extra: int) -> bytes:
    """LZ4's length continuation bytes for ``extra`` (the part of a length beyond the token's 15)."""
    full, rest = divmod(extra, 255)
    return b"\xff" * full + bytes([rest])


def lz4_block_bomb(size: int) -> bytes:
    """One LZ4 block that decodes to ``PREFIX`` followed by zeros, ``size`` bytes in all."""
    literals = PREFIX + b"\0"
    last = 5  # an LZ4 block ends with at least 5 literals
    match = size - len(literals) - last
    assert match >= 19
    token = (len(literals) << 4) | 15
    block = bytes([token]) + literals + (1).to_bytes(2, "little") + _lz4_length(match - 4 - 15)
    block += bytes([last << 4]) + bytes(last)
    return block


@functools.lru_cache(maxsize=8)
def bomb_payload(kind: str, size: int) -> tuple[bytes, int, int]:
    """(stored payload, object flag, header flag) of a bomb of ``kind`` expanding to ``size`` bytes."""
    if kind == "zstd":
        return zstd_bomb(size, declared=True), OBJECT_COMPRESSED_ZSTD, HEADER_COMPRESSED_ZSTD
    if kind == "zstd-undeclared":
        return zstd_bomb(size, declared=False), OBJECT_COMPRESSED_ZSTD, HEADER_COMPRESSED_ZSTD
    if kind == "xz":
        return xz_bomb(size), OBJECT_COMPRESSED_XZ, HEADER_COMPRESSED_XZ
    if kind in ("lz4", "lz4-lying"):
        claimed = size if kind == "lz4" else 16 * 1024 * 1024
        payload = claimed.to_bytes(8, "little") + lz4_block_bomb(size)
        return payload, OBJECT_COMPRESSED_LZ4, HEADER_COMPRESSED_LZ4
    raise ValueError(f"unknown bomb kind {kind!r}")


def normal_journal(out_dir: Path) -> Path:
    """The journal the bombs are planted in: one long kernel line among kubelet noise."""
    host = Host(31)
    host.new_boot(1_736_000_000_000_000)
    export = host.kernel("ena 0000:00:05.0 eth0: Trigger reset is on " + "padding " * 200)
    export += b"".join(kubelet_line(host, i) for i in range(200))
    write_journal(export, out_dir)
    (journal,) = (out_dir / MACHINE_ID).glob("*.journal")
    return journal


def plant(out_dir: Path, bomb: tuple[bytes, int, int]) -> Path:
    """``normal_journal`` in ``out_dir`` with ``bomb`` (as ``bomb_payload`` makes it) as its kernel
    MESSAGE's payload; returns ``out_dir``."""
    journal = normal_journal(out_dir)
    jb = JournalBytes(journal.read_bytes())
    (target,) = [o.offset for o in jb.objects() if o.type == OBJECT_DATA and o.flags]
    payload, object_flag, header_flag = bomb
    jb.relocate_data(target, payload, object_flag)
    jb.set("incompatible_flags", jb.get("incompatible_flags") | header_flag)
    journal.write_bytes(bytes(jb))
    return out_dir


def bomb_journal(kind: str, out_dir: Path, size: int) -> Path:
    """A journal directory whose kernel MESSAGE is a bomb of ``kind`` expanding to ``size`` bytes."""
    return plant(out_dir, bomb_payload(kind, size))


READ_CODE = r"""
import json, sys
from imagelint.facts.journal import SIGNALS, analyze_restarts, count_signal, open_image, open_path
out = {}
if len(sys.argv) > 2:  # a disk image: the journal is read by positioned reads through the page cache
    from imagelint.targets.disk import open_disk_file
    journal = open_image(open_disk_file(sys.argv[1]))
else:
    journal = open_path(sys.argv[1])
with journal as j:
    out["entries"] = sum(1 for _ in j.entries())
    out["restart_units"] = len(analyze_restarts(j).units)
    out["signals"] = sum(count_signal(j, spec).total for spec in SIGNALS.values())
    out["files"] = [(f.status.value, f.reason) for f in j.scan.files]
print(json.dumps(out))
"""


def peak_rss(directory: Path, *, timeout: float = 300, disk_image: bool = False) -> dict[str, object]:
    """Read ``directory`` (or, with ``disk_image``, the image's own journal) in a fresh process; what
    it reported, with the peak RSS of its process tree (``peak_mib``, :mod:`tests.treerss`)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-c", READ_CODE, str(directory), *(["disk"] if disk_image else [])]
    run = run_tree(command, timeout=timeout, env=env)
    if run.returncode != 0:
        raise RuntimeError(f"reading {directory} failed ({run.returncode}): {run.stderr[-2000:]}")
    result: dict[str, object] = json.loads(run.stdout)
    result["peak_mib"] = run.peak_mib
    return result
