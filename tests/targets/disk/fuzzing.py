"""Fuzzing the disk opener: small real images with mutated headers, each case in a forked child.

The corpus (:func:`build_corpus`) is made by the real tools: ext4, XFS, GPT and MBR disks, a whole-disk
LVM PV (root only), and the GPT disk converted by qemu-img to qcow2, vmdk (monolithicSparse and
streamOptimized), vhdx and vhd. A case (:func:`make_case`, reproducible from its seed and number)
changes a few bytes of one image's headers: random bytes, or a header field (by its known offset,
or any aligned word of the header area) set to a value that lies (0, all ones, 2^25, 2^31...).

:func:`run_case` runs ``open_disk_file`` on it and reads a little through the target (os-release,
fstab, a bounded walk) in a child forked with ``RLIMIT_AS`` and an alarm. Refusing the image with the
project's errors is a good answer; any other exception, a death by signal or a timeout is a crash,
counted under its signature (exception type and the innermost imagelint or dissect frame), and so
is a peak RSS over ``MAX_CASE_RSS_KIB``.
"""

from __future__ import annotations

import contextlib
import os
import random
import resource
import shutil
import signal
import subprocess
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from tests.support import loop_devices_work
from tests.targets.disk import small_images

ADDRESS_SPACE = 1 << 30  # on top of what the forking process already has
MAX_CASE_RSS_KIB = 256 * 1024  # more is a crash too (a MemoryError under the limit may pass as a refusal)
MIB = 1 << 20
PART = MIB  # where _partitioned puts the first partition
INTERESTING = [
    0,
    1,
    2,
    7,
    0x7F,
    0x80,
    0xFF,
    0x100,
    0xFFFF,
    0x10000,
    1 << 25,
    1 << 31,
    (1 << 32) - 1,
    1 << 32,
    1 << 40,
    (1 << 63) - 1,
    (1 << 64) - 1,
]

# (offset, width, byte order) of the header fields each format's readers count or seek with
_EXT_SB = [
    (1024 + o, w, "<")
    for o, w in [
        (0, 4),
        (4, 4),
        (24, 4),
        (28, 4),
        (32, 4),
        (40, 4),
        (88, 2),
        (92, 4),
        (96, 4),
        (150, 4),
        (254, 2),
        (336, 4),
    ]
]
_GPT = [
    (446 + 4, 1, "<"),
    (446 + 8, 4, "<"),
    (446 + 12, 4, "<"),
    (512 + 72, 8, "<"),
    (512 + 80, 4, "<"),
    (512 + 84, 4, "<"),
    (1024 + 32, 8, "<"),
    (1024 + 40, 8, "<"),
]
_MBR = [(446 + 16 * i + o, w, "<") for i in range(4) for o, w in [(4, 1), (8, 4), (12, 4)]]
FIELDS: dict[str, list[tuple[int, int, str]]] = {
    "ext4": _EXT_SB,
    "gpt": _GPT + [(PART + o, w, e) for o, w, e in _EXT_SB],
    "mbr": _MBR + [(PART + o, w, e) for o, w, e in _EXT_SB],
    "lvm": [
        (512 + o, w, "<")
        for o, w in [(8, 8), (20, 4), (64, 8), (72, 8), (80, 8), (88, 8), (96, 8), (104, 8), (112, 8)]
    ]
    + [(4096 + o, w, "<") for o, w in [(24, 8), (32, 8), (40, 8), (48, 8), (64, 8), (72, 8)]],
    "xfs": [
        (o, w, ">")
        for o, w in [
            (4, 4),
            (8, 8),
            (56, 8),
            (64, 8),
            (72, 8),
            (84, 4),
            (88, 4),
            (96, 4),
            (100, 4),
            (102, 2),
            (104, 2),
            (120, 1),
            (123, 1),
            (124, 1),
        ]
    ],
    "qcow2": [
        (o, w, ">")
        for o, w in [
            (4, 4),
            (8, 8),
            (16, 4),
            (20, 4),
            (24, 8),
            (36, 4),
            (40, 8),
            (48, 8),
            (56, 4),
            (60, 4),
            (64, 8),
            (72, 8),
            (96, 4),
            (100, 4),
        ]
    ],
    "vmdk": [
        (o, w, "<")
        for o, w in [(8, 4), (12, 8), (20, 8), (28, 8), (36, 8), (44, 4), (48, 8), (56, 8), (64, 8), (77, 2)]
    ],
    "vmdk-stream": [(-1024 + o, w, "<") for o, w in [(12, 8), (20, 8), (44, 4), (56, 8), (77, 2)]],
    "vhdx": [
        (196608 + o, w, "<") for o, w in [(8, 4), (16 + 16, 8), (16 + 24, 4), (48 + 16, 8), (48 + 24, 4)]
    ]
    + [(3 * MIB + o, w, "<") for o, w in [(10, 2), (32 + 16, 4), (32 + 20, 4), (64 + 16, 4)]],
    "vhd": [(-512 + o, w, ">") for o, w in [(16, 8), (48, 8), (60, 4)]]
    + [(512 + o, w, ">") for o, w in [(16, 8), (28, 4), (32, 4)]],
}
# byte ranges whose random bytes are worth mutating (negative: from the end)
AREAS: dict[str, list[tuple[int, int]]] = {
    "ext4": [(1024, 8192), (8192, 64 * 1024)],
    "gpt": [(0, 34 * 512), (PART + 1024, PART + 64 * 1024)],
    "mbr": [(0, 512), (PART + 1024, PART + 64 * 1024)],
    "lvm": [(0, 8192), (8192, 16384)],
    "xfs": [(0, 4096), (4096, 64 * 1024)],
    "qcow2": [(0, 4096), (4096, 512 * 1024)],
    "vmdk": [(0, 64 * 1024)],
    "vmdk-stream": [(0, 1024), (-2048, 0)],
    "vhdx": [(0, 1024), (64 * 1024, 6 * 64 * 1024), (2 * MIB, 2 * MIB + 4096), (3 * MIB, 3 * MIB + 4096)],
    "vhd": [(-512, 0), (512, 4096)],
}


def build_corpus(d: Path) -> dict[str, Path]:
    """The base images (built once into ``d``); LVM only as root (a loop device)."""
    d.mkdir(parents=True, exist_ok=True)
    done = d / "corpus.done"
    names = ["ext4", "gpt", "mbr", "xfs", "qcow2", "vmdk", "vmdk-stream", "vhdx", "vhd"]
    if shutil.which("pvcreate") and loop_devices_work():
        names.append("lvm")
    corpus = {name: d / f"base.{name}" for name in names}
    if done.exists():
        return {n: p for n, p in corpus.items() if p.exists()}
    fs = small_images.ext(d / "base.ext4", {"/etc/fstab": "# none\n", "/etc/hostname": "fuzz\n"})
    small_images.partitioned(d / "base.gpt", "gpt", fs)
    small_images.partitioned(d / "base.mbr", "dos", fs)
    small_images.xfs(d / "base.xfs")
    small_images.convert(corpus["gpt"], corpus["qcow2"], "qcow2")
    small_images.convert(corpus["gpt"], corpus["vmdk"], "vmdk")
    small_images.convert(corpus["gpt"], corpus["vmdk-stream"], "vmdk", "-o", "subformat=streamOptimized")
    small_images.convert(corpus["gpt"], corpus["vhdx"], "vhdx")
    small_images.convert(corpus["gpt"], corpus["vhd"], "vpc")
    if "lvm" in corpus:
        small_images.lvm(corpus["lvm"], fs)
    done.touch()
    return corpus


@dataclass
class Case:
    number: int
    name: str  # the base image
    kind: str  # "bytes" or "field"
    patches: list[tuple[int, bytes]]  # (offset from the start, bytes written)


def make_case(seed: str, number: int, corpus: dict[str, Path], sizes: dict[str, int]) -> Case:
    rnd = random.Random(f"{seed}:{number}")
    name = rnd.choice(sorted(corpus))
    size = sizes[name]
    patches: list[tuple[int, bytes]] = []
    kind = rnd.choice(["bytes", "field", "field"])
    for _ in range(rnd.choice([1, 1, 2, 3, 8])):
        if kind == "field":
            if rnd.random() < 0.7:
                at, width, order = rnd.choice(FIELDS[name])
            else:
                lo, hi = rnd.choice(AREAS[name])
                width, order = rnd.choice([2, 4, 8]), rnd.choice("<>")
                at = rnd.randrange(lo, hi or -width, width)
            value = rnd.choice([*INTERESTING, rnd.getrandbits(8 * width), size, size // 512, size * 2])
            value &= (1 << (8 * width)) - 1
            patches.append((at % size, value.to_bytes(width, "little" if order == "<" else "big")))
        else:
            lo, hi = rnd.choice(AREAS[name])
            at = rnd.randrange(lo, hi)
            raw = bytes(rnd.getrandbits(8) for _ in range(rnd.choice([1, 1, 2, 4, 16])))
            patches.append((at % size, raw))
    return Case(number, name, kind, patches)


@dataclass
class Outcome:
    case: Case
    result: str  # "opened", "refused", or "crash"
    signature: str  # for a crash
    seconds: float
    maxrss_kib: int  # what the case added to the RSS it started with


def exercise(path: Path) -> str:
    from imagelint.errors import ImageLintError
    from imagelint.targets.disk import open_disk_file

    try:
        target = open_disk_file(path)
    except ImageLintError:
        return "refused"
    for p in ("/etc/os-release", "/etc/fstab", "/etc/hostname"):
        with contextlib.suppress(ImageLintError):
            target.read_bytes(p)
    try:
        for n, _st in enumerate(target.walk("/")):
            if n > 2000:
                break
    except ImageLintError:
        pass
    return "opened"


def _signature(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    inner = next(
        (f for f in reversed(frames) if "dissect" in f.filename or "imagelint" in f.filename),
        frames[-1] if frames else None,
    )
    where = f"{Path(inner.filename).name}:{inner.lineno}" if inner else "?"
    return f"{type(exc).__name__} at {where}"


def run_case(case: Case, base: Path, work: Path, timeout: float) -> Outcome:
    """Apply the case's patches to ``work`` (a copy of ``base``), run it in a child, undo them."""
    saved = []
    with open(work, "r+b") as f:
        for at, raw in case.patches:
            f.seek(at)
            saved.append((at, f.read(len(raw))))
        for at, raw in case.patches:
            f.seek(at)
            f.write(raw)
    read_end, write_end = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: limits, the case, its answer on the pipe
        os.close(read_end)
        # a fork starts with the parent's memory (a whole test session's, in the suite): the limit
        # and the peak are measured from there
        space = _status_kib("VmSize") * 1024 + ADDRESS_SPACE
        resource.setrlimit(resource.RLIMIT_AS, (space, space))
        _reset_peak_rss()
        base = _status_kib("VmRSS")
        signal.alarm(max(1, int(timeout)))
        try:
            answer = exercise(work)
        except BaseException as exc:  # any of them is the crash being counted
            answer = "crash:" + _signature(exc)
        grown = max(0, _status_kib("VmHWM") - base)
        os.write(write_end, f"{grown} {answer}".encode()[:4000])
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as r:
        grown_text, _, answer = r.read().decode().partition(" ")
    _pid, status, _usage = os.wait4(pid, 0)
    grown = int(grown_text) if grown_text.isdigit() else 0
    seconds = time.monotonic() - start
    with open(work, "r+b") as f:
        for at, raw in reversed(saved):
            f.seek(at)
            f.write(raw)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        answer = "crash:timeout" if sig == signal.SIGALRM else f"crash:killed by {signal.Signals(sig).name}"
    elif not answer:
        answer = f"crash:exit {os.WEXITSTATUS(status)} without an answer"
    if grown > MAX_CASE_RSS_KIB and not answer.startswith("crash:"):
        answer = f"crash:peak RSS over {MAX_CASE_RSS_KIB // 1024} MiB ({case.name})"
    result, _, signature = answer.partition(":")
    return Outcome(case, result, signature, seconds, grown)


def _status_kib(field: str) -> int:
    """A ``kB`` line of /proc/self/status (VmSize, VmRSS, VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak_rss() -> None:
    """Start VmHWM afresh at the current RSS (Linux: ``5`` to /proc/PID/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def prepare(corpus: dict[str, Path], work_dir: Path) -> tuple[dict[str, Path], dict[str, int]]:
    """A working copy of each base image (sparse) to patch and restore, and their sizes."""
    work_dir.mkdir(parents=True, exist_ok=True)
    copies = {}
    for name, base in corpus.items():
        copy = work_dir / base.name
        subprocess.run(["cp", "--sparse=always", str(base), str(copy)], check=True)
        copies[name] = copy
    return copies, {name: p.stat().st_size for name, p in corpus.items()}


def preload() -> None:
    """Import what every case imports, once, before forking (each child then starts warm)."""
    import dissect.extfs
    import dissect.hypervisor.disk.qcow2
    import dissect.hypervisor.disk.vhd
    import dissect.hypervisor.disk.vhdx
    import dissect.hypervisor.disk.vmdk
    import dissect.volume.disk.schemes
    import dissect.volume.lvm
    import dissect.xfs

    import imagelint.targets.disk.open  # noqa: F401

    del dissect
