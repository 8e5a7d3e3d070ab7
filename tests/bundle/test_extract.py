"""The bundle comes from an untrusted machine: every hostile member type is refused before anything
is written outside the private directory, and a good bundle keeps links as links and modes as data."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from imagelint.bundle.extract import MAX_CHAIN, MAX_EXTENDED, BundleError, Caps, extract
from imagelint.errors import ImageReadError
from imagelint.targets.rootfs import FileKind
from tests.support import run_cli_measured

MANIFEST = b"imagelint-bundle 1\ncollector test\n"


def _add(tar: tarfile.TarFile, name: str, data: bytes = b"", **fields: object) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in fields.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data) if data else None)


def _bundle(
    tmp_path: Path, build: Callable[[tarfile.TarFile], None], *, manifest: bytes | None = MANIFEST
) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, "./", type=tarfile.DIRTYPE, mode=0o755)
        build(tar)
        if manifest is not None:
            _add(tar, "imagelint/manifest.txt", manifest)
    path = tmp_path / "bundle.tar.gz"
    path.write_bytes(gzip.compress(buf.getvalue()))
    return path


def _refused(
    tmp_path: Path, build: Callable[[tarfile.TarFile], None], words: str, caps: Caps | None = None
) -> None:
    before = set(os.listdir(tmp_path))
    bundle = _bundle(tmp_path, build)
    with pytest.raises(BundleError) as info:
        extract(bundle, caps or Caps())
    assert words in info.value.message, info.value.message
    assert info.value.exit_code == 3
    assert set(os.listdir(tmp_path)) == before | {"bundle.tar.gz"}  # nothing written beside it


def test_a_good_bundle_keeps_links_as_links_and_modes_as_data(tmp_path: Path) -> None:
    def build(tar: tarfile.TarFile) -> None:
        _add(tar, "./etc", type=tarfile.DIRTYPE, mode=0o755)
        _add(tar, "./etc/passwd-link", type=tarfile.SYMTYPE, linkname="/etc/passwd")
        _add(tar, "./etc/escape", type=tarfile.SYMTYPE, linkname="../../../../etc/shadow")
        _add(tar, "./usr", type=tarfile.DIRTYPE, mode=0o755)
        _add(tar, "./usr/sudo", b"#!/bin/sh\n", mode=0o4755, uid=0, gid=0)

    extracted = extract(_bundle(tmp_path, build))
    try:
        link = extracted.root / "etc/passwd-link"
        assert link.is_symlink() and os.readlink(link) == "/etc/passwd"
        assert os.readlink(extracted.root / "etc/escape") == "../../../../etc/shadow"
        sudo = extracted.root / "usr/sudo"
        assert sudo.stat().st_mode & 0o7777 == 0o600  # never setuid on this machine
        assert extracted.table["/usr/sudo"].mode == 0o4755  # the image's mode is kept as data
        assert extracted.table["/etc/escape"].kind is FileKind.SYMLINK
        assert (extracted.directory.stat().st_mode & 0o777) == 0o700
    finally:
        extracted.cleanup()
    assert not extracted.directory.exists()


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("/etc/passwd", "neither ./<image path> nor imagelint/"),
        ("etc/passwd", "neither ./<image path> nor imagelint/"),
        ("./etc/../../outside", "'..' component"),
        ("imagelint/../x", "'..' component"),
        ("./" + "a/" * 600 + "f", "components"),
    ],
)
def test_bad_names_are_refused(tmp_path: Path, name: str, words: str) -> None:
    _refused(tmp_path, lambda tar: _add(tar, name, b"x"), words)


@pytest.mark.parametrize(
    "name", ["imagelint/soak/sample.0\nforged: line", "imagelint/live/\x1b[31mx", "imagelint/é"]
)
def test_record_names_are_the_collectors_own(tmp_path: Path, name: str) -> None:
    _refused(tmp_path, lambda tar: _add(tar, name, b"uptime 1\n"), "not a name the collector writes")


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        (tarfile.CHRTYPE, "a character device"),
        (tarfile.BLKTYPE, "a block device"),
        (tarfile.FIFOTYPE, "a FIFO"),
        (tarfile.LNKTYPE, "a hard link"),
        (tarfile.GNUTYPE_SPARSE, "GNU sparse"),
        (tarfile.CONTTYPE, "of tar type"),
    ],
)
def test_special_members_are_refused(tmp_path: Path, kind: bytes, words: str) -> None:
    _refused(tmp_path, lambda tar: _add(tar, "./dev-or-link", type=kind, linkname="./etc/passwd"), words)


def test_nothing_is_written_through_a_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()

    def build(tar: tarfile.TarFile) -> None:
        _add(tar, "./evil", type=tarfile.SYMTYPE, linkname=str(outside))
        _add(tar, "./evil/planted", b"owned\n")

    _refused(tmp_path, build, "below a symlink")
    assert list(outside.iterdir()) == []


def test_a_symlink_outside_the_image_part_is_refused(tmp_path: Path) -> None:
    _refused(
        tmp_path,
        lambda tar: _add(tar, "imagelint/live", type=tarfile.SYMTYPE, linkname="/etc"),
        "symlink outside",
    )


def test_duplicates_are_refused(tmp_path: Path) -> None:
    def build(tar: tarfile.TarFile) -> None:
        _add(tar, "./etc-file", b"one")
        _add(tar, "./etc-file", b"two")

    _refused(tmp_path, build, "appears twice")


def test_sizes_and_counts_are_capped(tmp_path: Path) -> None:
    _refused(tmp_path, lambda tar: _add(tar, "./big", b"x" * 2000), "over 1,000", Caps(file=1000))

    def many(tar: tarfile.TarFile) -> None:
        for i in range(20):
            _add(tar, f"./f{i}", b"x" * 100)

    _refused(tmp_path, many, "more than 1,500 bytes of content", Caps(total=1500))
    _refused(tmp_path, many, "more than 10 members", Caps(members=10))


def test_a_compression_bomb_is_bounded(tmp_path: Path) -> None:
    # a member of 64 MiB of zeros compresses to ~64 KiB; the stream cap stops it long before the
    # whole is inflated, even when the file and total caps would allow it
    size = 64 * 1024 * 1024
    header = tarfile.TarInfo("./zeros")
    header.size = size
    bomb = tmp_path / "bomb.tar.gz"
    bomb.write_bytes(gzip.compress(header.tobuf(tarfile.PAX_FORMAT) + b"\0" * size, 9))
    assert bomb.stat().st_size < 200_000
    with pytest.raises(BundleError, match="decompresses to more than"):
        extract(bomb, Caps(file=size, total=size, stream=4 * 1024 * 1024))


def test_not_a_tar_and_no_manifest(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"\x1f\x8bnot gzip at all")
    with pytest.raises(BundleError, match="not a readable tar archive"):
        extract(junk)
    with pytest.raises(BundleError, match=r"no imagelint/manifest\.txt"):
        extract(_bundle(tmp_path, lambda tar: None, manifest=None))


def _header(name: str, kind: bytes, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(tarfile.USTAR_FORMAT)


def test_a_600_mib_pax_header_is_refused_before_tarfile_reads_it(tmp_path: Path) -> None:
    # a sparse file: the header block, then 600 MiB of hole that tarfile would read into memory
    bomb = tmp_path / "bomb.tar"
    with open(bomb, "wb") as f:
        f.write(_header("./PaxHeaders/x", tarfile.XHDTYPE, 600 * 1024 * 1024))
        f.truncate(512 + 600 * 1024 * 1024 + 1024)
    run_cli_measured("audit", str(bomb)).assert_one_line(3, str(bomb), "pax header of 629,145,600 bytes")


@pytest.mark.parametrize("kind", [tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.GNUTYPE_LONGNAME])
def test_every_extended_header_is_bounded(tmp_path: Path, kind: bytes) -> None:
    big = tmp_path / "big.tar"
    big.write_bytes(_header("./h", kind, MAX_EXTENDED + 1) + b"\0" * (MAX_EXTENDED + 1024))
    with pytest.raises(BundleError, match="header of"):
        extract(big)


def test_a_chain_of_extended_headers_is_refused(tmp_path: Path) -> None:
    # each pax header makes tarfile recurse into the next: a long chain ends in RecursionError
    record = b"12 comment=\n"
    chain = (_header("./PaxHeaders/x", tarfile.XHDTYPE, len(record)) + record.ljust(512, b"\0")) * 2000
    path = tmp_path / "chain.tar"
    path.write_bytes(chain + _header("./f", tarfile.REGTYPE, 0) + b"\0" * 1024)
    with pytest.raises(BundleError, match=f"more than {MAX_CHAIN} extended headers"):
        extract(path)


@pytest.mark.slow
def test_pax_records_that_make_tarfile_quadratic_are_bounded_in_all(tmp_path: Path) -> None:
    # "2 2 2 ... =": tarfile's record regex rescans to the '=' for every record (CVE-2024-6232)
    records = (b"2 " * (MAX_EXTENDED // 2 - 1) + b"=\n")[:MAX_EXTENDED]
    one = _header("./PaxHeaders/g", tarfile.XGLTYPE, len(records)) + records
    members = b"".join(one + _header(f"./f{i}", tarfile.REGTYPE, 0) for i in range(100))
    path = tmp_path / "slow.tar"
    path.write_bytes(members + b"\0" * 1024)
    # the tarfile of Python before 3.11.4 (Debian 12's 3.11.2) refuses these records itself, at the
    # first header; a newer one parses each (bounded by MAX_EXTENDED) and our total bound refuses them
    words = "bytes of pax headers" if hasattr(tarfile, "data_filter") else "not a readable tar archive"
    with pytest.raises(BundleError, match=words):
        extract(path)


def test_a_malformed_sparse_map_in_a_pax_header_is_refused(tmp_path: Path) -> None:
    def build(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo("./sparse")
        info.size = 512
        info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.realsize": "9"}
        tar.addfile(info, io.BytesIO(b"not-a-number\n".ljust(512, b"\0")))

    _refused(tmp_path, build, "not a readable tar archive")


@pytest.mark.parametrize(
    ("listed", "words"),
    [
        (b"./\n./etc\n./etc/machine-id\n./etc/ssh\n", "'/etc/ssh' is missing"),
        (b"./\n./etc\n", "'/etc/machine-id' is not listed"),
    ],
)
def test_a_member_renamed_on_the_way_is_damage(tmp_path: Path, listed: bytes, words: str) -> None:
    """A tar header's checksum is a byte sum: two flipped bits can rename a member and keep it. The
    collector's members.txt catches it, where the file would otherwise read as absent."""

    def build(tar: tarfile.TarFile) -> None:
        _add(tar, "./etc", type=tarfile.DIRTYPE, mode=0o755)
        _add(tar, "./etc/machine-id", b"0123\n")
        _add(tar, "imagelint/members.txt", listed)

    _refused(tmp_path, build, words)


def test_a_bundle_whose_members_are_the_listed_ones_is_read(tmp_path: Path) -> None:
    def build(tar: tarfile.TarFile) -> None:
        _add(tar, "./etc", type=tarfile.DIRTYPE, mode=0o755)
        _add(tar, "./etc/machine-id", b"0123\n")
        _add(tar, "imagelint/members.txt", b"./\n./etc\n./etc/machine-id\n")

    extracted = extract(_bundle(tmp_path, build))
    try:
        assert "/etc/machine-id" in extracted.table
    finally:
        extracted.cleanup()


def _described(entries: int, per_directory: int = 1000) -> bytes:
    """A manifest describing ``entries`` files without content, as the collector's walks do."""
    lines = (f"stat 81a4 0 0 12 metadata /srv/d{i // per_directory}/f{i}\n" for i in range(entries))
    return MANIFEST + "".join(lines).encode()


@pytest.mark.slow
def test_a_manifest_of_many_stat_lines_is_read_within_memory(tmp_path: Path) -> None:
    """250,000 entries described (the collector lists 300,000 at most by default): each is a placeholder
    and a table row, the manifest is read a line at a time (it took 180 MiB, 208 at 300,000)."""
    bundle = _bundle(tmp_path, lambda tar: None, manifest=_described(250_000))
    # a crafted bundle with no OS root's marks: audited as it is, every rule reading the table
    measured = run_cli_measured(
        "audit", str(bundle), "-f", "json:/dev/null", "--allow-partial-root", timeout=300
    )
    assert "Traceback" not in measured.stderr and "internal error" not in measured.stderr, measured.stderr
    assert "not an operating system's root" not in measured.stderr
    measured.assert_within_memory()


def test_a_manifest_holds_no_more_lines_than_the_bundle_may_have_entries(tmp_path: Path) -> None:
    """Every line is state of the run (a placeholder, a glob asked, a value): past the members cap
    it is refused, naming the line."""
    values = MANIFEST + "".join(f"value{i} 1\n" for i in range(12_000)).encode()
    bundle = _bundle(tmp_path, lambda tar: None, manifest=values)
    with pytest.raises(ImageReadError, match="more than 10,0"):
        extract(bundle, Caps(members=10))
    bundle = _bundle(tmp_path, lambda tar: None, manifest=_described(12_000))
    with pytest.raises(ImageReadError) as info:
        extract(bundle, Caps(members=100))
    assert info.value.path.startswith("imagelint/manifest.txt:")
