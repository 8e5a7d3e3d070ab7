"""Damage never passes: the bundled failing sample, damaged one structure at a time, audited for real.

The corpus (built once per machine under the tests' cache, in a temporary directory renamed into
place under a lock) is the sample of ``examples/sample-image.yaml``, with a real journal of ecs.service's
crash loop in ``/var/log/journal`` (written by systemd-journal-remote, :func:`_write_journal`), made
three ways by the real tools:
an ext4 filesystem (``mke2fs -d``, default features, so ``metadata_csum``) in a GPT disk (``sfdisk``,
:func:`tests.targets.disk.images._partitioned`) as a raw file, the same disk converted to qcow2
(``qemu-img convert``), and the bundle the real collector makes of the tree.

The structures an audit reads are found with the real on-disk layouts: each entry's inode and the
extent header inside it (``debugfs imap``), each directory's data blocks (``debugfs blocks``), the
MBR, the GPT header and its first entry, every tar header of the bundle, and the journal's objects
(DATA payloads, object headers, ENTRY items: walked by ``tests.facts.journal.craft``, placed where
``debugfs blocks`` and the tar member put the file's bytes). In the qcow2 file each lies where
``qemu-img map`` puts its guest bytes. A case (:func:`make_case`, seeded: case N of seed S
is always the same) picks an image, one structure of it and one corruption: zeroed, bits flipped,
random bytes, or a count field set to a lying value.

:func:`run_case` applies it to a working copy, runs the audit in this process through the same
entry as the CLI (``open_spec`` then ``session.audit_opened``, the sample's config), undoes it and
classifies the answer (:data:`OUTCOMES`). A case is a defect when it passes (exit 0), exits 2, ends
in an exception that is not the project's, or fails with findings other than the undamaged run's
while the report carries no error: damaged data read as a different, maybe milder, finding. Findings
are compared by rule, subject and message, failing on their own (a restart loop folded into IL206's
finding counts: its loss, or another restart count, is a changed finding).
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support import REPO

if TYPE_CHECKING:
    from imagelint.report import Report
    from imagelint.session import PreparedRun

MIB = 1024 * 1024
FS_SIZE = 8 * MIB
FS_OFFSET = MIB  # where _partitioned puts the first partition
FS_UUID = "1d2a7c3e-5b6f-4a8d-9e0f-112233445566"
VERSION = "5"
IMAGES = ("raw", "qcow2", "bundle")
MODES = ("zero", "bitflip", "random", "count")
CLASSES = ("inode", "extent header", "directory block", "partition table", "tar header", "journal objects")
JOURNAL_DIR = "/var/log/journal/6f1c3a9e2b7d4e5f8a0b1c2d3e4f5a6b"  # the sample's machine id
JOURNAL = f"{JOURNAL_DIR}/system.journal"
# what a case can come to: the first three are answers, the rest defects
# (exit 1 with the undamaged run's failing findings; exit 1 with others and an error in the report...)
SAME, CHANGED_MARKED, INCONCLUSIVE = "fail same", "fail changed+error", "inconclusive"
PASSED, CHANGED_UNMARKED, USAGE, CRASH = "PASS", "fail changed NO ERROR", "exit 2", "crash"
OUTCOMES = (SAME, CHANGED_MARKED, INCONCLUSIVE, PASSED, CHANGED_UNMARKED, USAGE, CRASH)
DEFECTS = frozenset({PASSED, CHANGED_UNMARKED, USAGE, CRASH})


@dataclass(frozen=True)
class Structure:
    """One structure an audit reads: its class, which image holds it, what it belongs to, and where
    (raw/qcow2: bytes of the image file; bundle: bytes of the uncompressed tar)."""

    cls: str
    image: str
    owner: str
    offset: int
    length: int
    counts: tuple[tuple[int, int], ...] = ()  # (offset inside, size) of the fields that count things


@dataclass(frozen=True)
class Case:
    number: int
    structure: Structure
    mode: str
    patches: tuple[tuple[int, bytes], ...]

    def label(self) -> str:
        s = self.structure
        patches = ", ".join(f"{len(raw)} bytes at {at} ({raw[:8].hex()})" for at, raw in self.patches)
        return f"case {self.number}: {s.image} {s.cls} of {s.owner}, {self.mode}: {patches}"


@dataclass
class Corpus:
    """The built images (``raw``, ``qcow2``: disk files; ``bundle``: the uncompressed tar; ``fs``: the
    ext4 filesystem of the disks) and the structures found in them."""

    files: dict[str, Path]
    structures: list[Structure]

    def of(self, image: str) -> list[Structure]:
        return [s for s in self.structures if s.image == image]


# -- building ---------------------------------------------------------------------------------------


def corpus_dir() -> Path:
    from tests.targets.disk.images import cache_dir

    return cache_dir() / f"damage-{VERSION}"


def build_corpus() -> Corpus:
    """The corpus, built once per machine (a temporary directory renamed into place, under a lock)."""
    final = corpus_dir()
    if not (final / "structures.json").exists():
        final.parent.mkdir(parents=True, exist_ok=True)
        with open(final.parent / f"{final.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (final / "structures.json").exists():
                tmp = final.parent / f".{final.name}.{os.getpid()}.partial"
                shutil.rmtree(tmp, ignore_errors=True)
                tmp.mkdir()
                try:
                    _build(tmp)
                    shutil.rmtree(final, ignore_errors=True)
                    os.rename(tmp, final)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
    rows = json.loads((final / "structures.json").read_text())
    structures = [Structure(r[0], r[1], r[2], r[3], r[4], tuple(map(tuple, r[5]))) for r in rows]
    files = {"raw": final / "disk.raw", "qcow2": final / "disk.qcow2", "bundle": final / "bundle.tar"}
    files["fs"] = final / "fs.img"  # the ext4 filesystem the disks hold, on its own
    return Corpus(files, structures)


def _run(*cmd: str | Path, stdin: str | None = None) -> str:
    done = subprocess.run([str(c) for c in cmd], input=stdin, capture_output=True, text=True, check=True)
    return done.stdout + done.stderr


def _build(d: Path) -> None:
    from tests.collector.support import collect
    from tests.targets.disk.images import _partitioned

    tree = d / "tree"
    _run(sys.executable, REPO / "scripts/make-sample-image.py", REPO / "examples/sample-image.yaml", tree)
    journal = _write_journal(tree, d / "journal")
    fs = d / "fs.img"
    _run("mke2fs", "-q", "-F", "-t", "ext4", "-U", FS_UUID, "-d", tree, fs, f"{FS_SIZE // 1024}k")
    _partitioned(d / "disk.raw", "gpt", [("L", fs, FS_SIZE)])
    _run("qemu-img", "convert", "-O", "qcow2", d / "disk.raw", d / "disk.qcow2")
    bundle = collect(tree, d / "collect")
    (d / "bundle.tar").write_bytes(gzip.decompress(bundle.read_bytes()))
    objects = list(_journal_objects(journal))
    disk = [*_ext4_structures(fs, tree), *_partition_structures(), *_in_fs(fs, JOURNAL, objects)]
    structures = [*(_on("raw", s) for s in disk), *_on_qcow2(d / "disk.qcow2", disk)]
    structures += _tar_structures(d / "bundle.tar")
    structures += _in_tar(d / "bundle.tar", JOURNAL, objects)
    rows = [[s.cls, s.image, s.owner, s.offset, s.length, [list(c) for c in s.counts]] for s in structures]
    (d / "structures.json").write_text(json.dumps(rows))
    shutil.rmtree(d / "collect")
    shutil.rmtree(tree)


def _ext4_structures(fs: Path, tree: Path) -> Iterator[Structure]:
    """Inodes, extent headers and directory blocks of every entry of the tree, where debugfs says."""
    entries = ["/", *sorted("/" + str(p.relative_to(tree)) for p in tree.rglob("*"))]
    stats = _run("dumpe2fs", "-h", fs)
    block = int(_field(stats, "Block size:"))
    inode_size = int(_field(stats, "Inode size:"))
    dirs = [e for e in entries if (tree / e.lstrip("/")).is_dir() and not (tree / e.lstrip("/")).is_symlink()]
    script = "".join(f'imap "{e}"\n' for e in entries) + "".join(f'blocks "{e}"\n' for e in dirs)
    out = _run("debugfs", "-f", "-", fs, stdin=script).splitlines()
    places = iter(line for line in out if "located at block" in line)
    for entry in entries:
        words = next(places).replace(",", "").split()
        at = FS_OFFSET + int(words[3]) * block + int(words[5], 16)
        counts = ((4, 4), (0x1A, 2), (0x1C, 4))  # i_size_lo, i_links_count, i_blocks_lo
        yield Structure("inode", "", entry, at, inode_size, counts)
        if not (tree / entry.lstrip("/")).is_symlink():  # a fast symlink keeps its target there instead
            yield Structure("extent header", "", entry, at + 40, 12, ((2, 2), (4, 2), (6, 2)))
    listed = [line.split() for line in out if line and line[0].isdigit()]
    for entry, blocks in zip(dirs, listed, strict=True):
        for number in blocks:
            at = FS_OFFSET + int(number) * block
            yield Structure("directory block", "", entry, at, block, ((4, 2), (6, 1)))  # rec_len, name_len


def _write_journal(tree: Path, work: Path) -> bytes:
    """The build's journal the sample carries: ecs.service crash-looping (exit, failure, scheduled
    restart, start: 30 turns in one boot) among kubelet noise and kernel lines, written by the real
    systemd-journal-remote, its data hash table shrunk to 127 buckets (a small file whose chains are
    walked); the file's bytes, also put at ``JOURNAL`` in the tree."""
    from tests.facts.journal.craft import JournalBytes, shrink_data_hash_table
    from tests.facts.journal.exportgen import Host, kubelet_line, write_journal

    host = Host(40)
    host.new_boot(1_764_000_000_000_000)
    export = [host.kernel("Linux version 6.1.0-28-cloud-amd64", priority="5")]
    for n in range(1, 31):
        export += host.crash_cycle("ecs.service", "amazon-ecs-agent", n)
        export += [kubelet_line(host, 3 * n + i) for i in range(3)]
    (path,) = write_journal(b"".join(export), work).glob("*/system.journal")
    data = bytes(shrink_data_hash_table(JournalBytes(path.read_bytes()), 127))
    (tree / JOURNAL.lstrip("/")).parent.mkdir(parents=True)
    (tree / JOURNAL.lstrip("/")).write_bytes(data)
    shutil.rmtree(work)
    return data


def _journal_objects(data: bytes) -> Iterator[Structure]:
    """The objects of the journal an audit reads, as offsets in the file: every DATA payload, every
    object header (DATA, ENTRY and ENTRY_ARRAY headers with their links and counts) and every
    ENTRY's items."""
    from tests.facts.journal.craft import OBJECT_DATA, OBJECT_ENTRY, OBJECT_ENTRY_ARRAY, JournalBytes

    jb = JournalBytes(data)
    po = jb.data_payload_offset
    headers = {OBJECT_DATA: po, OBJECT_ENTRY: 64, OBJECT_ENTRY_ARRAY: 24}
    counts = {OBJECT_DATA: ((8, 8), (56, 8)), OBJECT_ENTRY: ((8, 8), (16, 8)), OBJECT_ENTRY_ARRAY: ((8, 8),)}
    for obj in jb.objects():
        if obj.type not in headers:
            continue
        at = f"{obj.offset:#x}"
        header = headers[obj.type]
        yield Structure("journal objects", "", f"object header at {at}", obj.offset, header, counts[obj.type])
        if obj.type == OBJECT_DATA:
            name = jb.data_payload(obj.offset).split(b"=", 1)[0][:32] if not obj.flags else b"(compressed)"
            owner = f"DATA payload {name.decode(errors='replace')} at {at}"
            yield Structure("journal objects", "", owner, obj.offset + po, obj.size - po)
        elif obj.type == OBJECT_ENTRY:
            yield Structure("journal objects", "", f"entry items at {at}", obj.offset + 64, obj.size - 64)


def _in_fs(fs: Path, path: str, objects: list[Structure]) -> Iterator[Structure]:
    """``objects`` (offsets in the file at ``path``) where the file's blocks lie in the disk; a part
    past the end of a run of consecutive blocks is left out."""
    block = int(_field(_run("dumpe2fs", "-h", fs), "Block size:"))
    listed = subprocess.run(["debugfs", "-R", f'blocks "{path}"', str(fs)], capture_output=True, text=True)
    blocks = [int(b) for b in listed.stdout.split()]
    for s in objects:
        first, last = s.offset // block, (s.offset + s.length - 1) // block
        contiguous = all(blocks[first + i] == blocks[first] + i for i in range(last - first + 1))
        length = s.length if contiguous else (first + 1) * block - s.offset
        at = FS_OFFSET + blocks[first] * block + s.offset % block
        yield Structure(s.cls, "", s.owner, at, length, s.counts)


def _in_tar(tar: Path, path: str, objects: list[Structure]) -> Iterator[Structure]:
    """``objects`` where the bundle's tar holds the bytes of the file at ``path``."""
    with tarfile.open(tar) as t:
        (member,) = [m for m in t.getmembers() if m.name.endswith(path)]
    for s in objects:
        yield Structure(s.cls, "bundle", s.owner, member.offset_data + s.offset, s.length, s.counts)


def _field(text: str, name: str) -> str:
    return next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith(name))


def _partition_structures() -> list[Structure]:
    return [
        Structure("partition table", "", "MBR", 0, 512, ((446 + 8, 4), (446 + 12, 4))),
        Structure("partition table", "", "GPT header", 512, 92, ((0x0C, 4), (0x50, 4), (0x54, 4))),
        Structure("partition table", "", "GPT entry 1", 1024, 128, ((0x20, 8), (0x28, 8))),
    ]


def _on(image: str, s: Structure, offset: int | None = None) -> Structure:
    return Structure(s.cls, image, s.owner, s.offset if offset is None else offset, s.length, s.counts)


def _on_qcow2(path: Path, disk: list[Structure]) -> Iterator[Structure]:
    """The same structures where the qcow2 file keeps their guest bytes (``qemu-img map``)."""
    extents = json.loads(_run("qemu-img", "map", "--output=json", path))
    for s in disk:
        for e in extents:
            if e["data"] and e["start"] <= s.offset and s.offset + s.length <= e["start"] + e["length"]:
                yield _on("qcow2", s, e["offset"] + s.offset - e["start"])
                break


def _tar_structures(tar: Path) -> Iterator[Structure]:
    with tarfile.open(tar) as t:
        for m in t.getmembers():
            yield Structure("tar header", "bundle", m.name, m.offset, 512, ((124, 12), (148, 8)))  # size, sum


# -- cases ------------------------------------------------------------------------------------------


def make_case(seed: str, number: int, corpus: Corpus) -> Case:
    """Case ``number`` of ``seed``: an image, one structure of it, one corruption of it."""
    rng = random.Random(f"{seed}:{number}")
    of_image = corpus.of(rng.choice(IMAGES))
    cls = rng.choice(sorted({s.cls for s in of_image}))  # each class as often, however many it has
    structure = rng.choice([s for s in of_image if s.cls == cls])
    mode = rng.choice(MODES)
    at, size = structure.offset, structure.length
    if mode == "zero":
        patch = (at, bytes(size))
    elif mode == "random":
        start = rng.randrange(size)
        patch = (at + start, rng.randbytes(rng.randint(1, size - start)))
    elif mode == "count" and structure.counts:
        where, width = rng.choice(structure.counts)
        value = rng.choice([0, 1, (1 << 8 * width) - 1, rng.getrandbits(8 * width)])
        if structure.cls == "tar header":  # tar counts are octal text
            raw = (oct(value)[2:][: width - 1].rjust(width - 1, "0") + "\0").encode()
        else:
            raw = value.to_bytes(width, "little")
        patch = (at + where, raw)
    else:
        mode = "bitflip" if mode == "count" else mode
        return Case(number, structure, mode, tuple(_flip(rng, at, size) for _ in range(rng.randint(1, 3))))
    return Case(number, structure, mode, (patch,))


def _flip(rng: random.Random, at: int, size: int) -> tuple[int, bytes]:
    """One bit flipped: the patch is the flip mask, applied by XOR (see :class:`Work`)."""
    return (at + rng.randrange(size), bytes([1 << rng.randrange(8)]))


# -- running ----------------------------------------------------------------------------------------


@dataclass
class Answer:
    outcome: str
    exit_code: int | None
    detail: str


class Work:
    """Working copies of the corpus's images, each case applied to one and undone after its audit."""

    def __init__(self, corpus: Corpus, work_dir: Path) -> None:
        self.corpus = corpus
        self.dir = work_dir
        self.copies = {name: work_dir / f"sample.{name}" for name in ("raw", "qcow2")}
        for name, copy in self.copies.items():
            shutil.copyfile(corpus.files[name], copy)
        self.tar = self.tar_now = corpus.files["bundle"].read_bytes()  # the bundle's tar, as audited next
        self.bundle = work_dir / "sample-bundle.tar.gz"
        self.run = sample_run()
        self.baseline = {image: self.audit(image)[1] for image in IMAGES}
        for image, failing in self.baseline.items():
            assert failing, f"the undamaged {image} does not fail: no baseline to compare with"

    def audit(self, image: str) -> tuple[int, frozenset[tuple[str, str, str]], bool]:
        """(exit code, failing findings, whether the report carries errors) of one image as it is."""
        from imagelint.errors import ImageLintError
        from imagelint.report.verdict import fails_on_its_own

        path = self.bundle if image == "bundle" else self.copies[image]
        if image == "bundle":
            path.write_bytes(gzip.compress(self.tar_now, 1))
        try:
            report = audit(self.run, path)
        except ImageLintError as exc:
            return int(exc.exit_code), frozenset(), True
        failing = frozenset(
            (f.rule_id, f.path or f.subject or "", f.message) for f in report.findings if fails_on_its_own(f)
        )
        errors = bool(report.errors) or any(r.outcome.value == "error" for r in report.rules)
        return int(report.verdict.exit_code), failing, errors

    @contextlib.contextmanager
    def applied(self, case: Case) -> Iterator[None]:
        image = case.structure.image
        if image == "bundle":
            data = bytearray(self.tar)
            for at, raw in case.patches:
                _patch(data, at, raw, xor=case.mode == "bitflip")
            self.tar_now = bytes(data)
            try:
                yield
            finally:
                self.tar_now = self.tar
            return
        with open(self.copies[image], "r+b") as f:
            saved = []
            for at, raw in case.patches:
                f.seek(at)
                old = f.read(len(raw))
                saved.append((at, old))
                new = bytearray(old)
                _patch(new, 0, raw, xor=case.mode == "bitflip")
                f.seek(at)
                f.write(new)
        try:
            yield
        finally:
            with open(self.copies[image], "r+b") as f:
                for at, old in reversed(saved):
                    f.seek(at)
                    f.write(old)

    def run_case(self, case: Case) -> Answer:
        image = case.structure.image
        try:
            with self.applied(case):
                code, failing, errors = self.audit(image)
        except Exception as exc:  # not the project's errors: a crash
            return Answer(CRASH, None, f"{type(exc).__name__}: {exc}")
        if code == 0:
            return Answer(PASSED, code, "")
        if code == 3:
            return Answer(INCONCLUSIVE, code, "")
        if code != 1:
            return Answer(USAGE, code, "")
        if failing == self.baseline[image]:
            return Answer(SAME, code, "")
        lost = sorted(self.baseline[image] - failing)
        return Answer(CHANGED_MARKED if errors else CHANGED_UNMARKED, code, f"lost {lost[:4]}")


def sample_run() -> PreparedRun:
    """The run ``make demo`` makes: the built-in rules and the sample's config."""
    from imagelint.session import RunOptions, prepare

    return prepare(RunOptions(config_path=REPO / "examples/sample.imagelint.yaml", outputs=[]))


def audit(run: PreparedRun, path: Path) -> Report:
    """``imagelint audit PATH`` in this process, to its report (the project's errors propagate)."""
    from imagelint.openers import open_spec
    from imagelint.session import audit_opened

    with open_spec(str(path)) as opened:
        return audit_opened(run, opened)


def _patch(data: bytearray, at: int, raw: bytes, *, xor: bool) -> None:
    for i, b in enumerate(raw):
        if at + i < len(data):
            data[at + i] = data[at + i] ^ b if xor else b
