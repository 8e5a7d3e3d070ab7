"""Hostile disk images (issue 22): each a few KiB patched into a small real image, each one line, exit 3.

Images that name another file (a VMDK parent hint, a VHDX parent locator, a qcow2 backing file) are
refused without opening it: ``strace`` watches every file the run opens. Counts that lie (a qcow2
L1 of 2^25 entries, a GPT of 0xFFFFFFFF entries, an LVM metadata area of a TiB, an ext4 extent tree
naming 157 million extents, an inode claiming 1 TiB) are corruption: each run ends within its
timeout, under an address-space limit, with the peak RSS of its whole process tree measured
(``tests/treerss.py``) and at most ``MAX_RSS_MIB``.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import uuid
import zlib
from pathlib import Path

import pytest

from tests.support import loop_devices_work, need, run_cli
from tests.targets.disk import small_images
from tests.treerss import MAX_RSS_MIB, TreeRun, run_tree

ADDRESS_SPACE = 2 << 30  # the old code's allocations fail here instead of taking the machine
TIMEOUT = 60


def _exe() -> str:
    return shutil.which("imagelint", path=str(Path(sys.executable).parent)) or "imagelint"


def measured(*args: str, trace: Path | None = None) -> TreeRun:
    """``imagelint args`` (under ``strace -f -e trace=%file -o trace`` when given) with the peak RSS
    of its whole process tree."""
    command = [_exe(), *args]
    if trace is not None:
        command = [str(shutil.which("strace")), "-f", "-e", "trace=%file", "-o", str(trace), *command]
    env = {**os.environ, "NO_COLOR": "1"}
    return run_tree(command, timeout=TIMEOUT, env=env, address_space=ADDRESS_SPACE)


def one_line_inconclusive(image: Path, *expected: str, trace: Path | None = None) -> str:
    run = measured("audit", str(image), trace=trace)
    print(
        f"{image.name}: exit {run.returncode}, peak RSS {run.peak_kib} KiB, {run.seconds:.2f} s:",
        run.stderr.strip(),
    )
    assert not run.timed_out, f"no answer within {TIMEOUT} s"
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 3, (run.returncode, run.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith(f"imagelint: error: {image}: "), run.stderr[-2000:]
    for word in expected:
        assert word in lines[0], lines[0]
    assert run.peak_mib <= MAX_RSS_MIB, f"peak RSS of the process tree {run.peak_mib:.0f} MiB"
    return lines[0]


def never_opened(trace: Path, name: str) -> None:
    opened = [line for line in trace.read_text(errors="replace").splitlines() if name in line]
    assert not opened, opened[:5]


def _tools(*names: str) -> None:
    for name in names:
        need(shutil.which(name) is not None, f"{name} is not installed")


@pytest.fixture
def root_fs(tmp_path: Path) -> Path:
    _tools("mke2fs")
    return small_images.ext(tmp_path / "root.ext4")


# -- other files --------------------------------------------------------------------------------


def test_a_vmdk_with_an_absolute_parent_hint_opens_nothing_outside(tmp_path: Path, root_fs: Path) -> None:
    _tools("qemu-img", "strace")
    outside = tmp_path / "outside"
    outside.mkdir()
    parent = small_images.convert(root_fs, outside / "host-disk.vmdk", "vmdk")
    image = tmp_path / "image" / "child.vmdk"
    image.parent.mkdir()
    small_images.run("qemu-img", "create", "-q", "-f", "vmdk", "-b", parent, "-F", "vmdk", image)
    assert f'parentFileNameHint="{parent}"' in image.read_bytes().decode("latin-1")
    line = one_line_inconclusive(image, "parent/backing file", str(parent), trace=tmp_path / "trace")
    assert "imagelint opens only the file named" in line
    never_opened(tmp_path / "trace", "host-disk")


def _vhdx_with_parent(image: Path, parent_relative: str, parent_absolute: str) -> None:
    """Mark a dynamic VHDX made by qemu-img as differencing: the has_parent flag, and a parent locator
    metadata item (dissect does not check the checksums)."""
    with open(image, "r+b") as f:
        f.seek(3 * 65536)
        region = f.read(65536)
        count = struct.unpack_from("<I", region, 8)[0]
        entries = [struct.unpack_from("<16sQII", region, 16 + 32 * i) for i in range(count)]
        meta_at, meta_len = next(
            (o, n) for g, o, n, _ in entries if uuid.UUID(bytes_le=g).hex.startswith("8b7ca206")
        )
        f.seek(meta_at)
        table = f.read(65536)
        items = struct.unpack_from("<H", table, 10)[0]
        located = {}
        for i in range(items):
            item, offset, _length, _flags = struct.unpack_from("<16sIII", table, 32 + 32 * i)
            located[uuid.UUID(bytes_le=item)] = offset
        params = located[uuid.UUID("CAA16737-FA36-4D43-B3B6-33F0AA44E76B")]
        f.seek(meta_at + params + 4)
        flags = struct.unpack("<I", f.read(4))[0]
        f.seek(meta_at + params + 4)
        f.write(struct.pack("<I", flags | 2))
        pairs = [("relative_path", parent_relative), ("absolute_win32_path", parent_absolute)]
        locator = bytearray(
            uuid.UUID("B04AEFB7-D19E-4A81-B789-25B8E9445913").bytes_le + struct.pack("<HH", 0, 2)
        )
        strings = bytearray()
        base = 20 + 12 * len(pairs)
        for key, value in pairs:
            k, v = key.encode("utf-16-le"), value.encode("utf-16-le")
            locator += struct.pack("<IIHH", base + len(strings), base + len(strings) + len(k), len(k), len(v))
            strings += k + v
        locator += strings
        at = meta_len - 4096
        f.seek(meta_at + at)
        f.write(locator)
        f.seek(meta_at + 32 + 32 * items)
        f.write(
            uuid.UUID("A8D35F2D-B30B-454D-ABF7-D3D84834AB0C").bytes_le + struct.pack("<III4x", at, 4096, 4)
        )
        f.seek(meta_at + 10)
        f.write(struct.pack("<H", items + 1))


def test_a_vhdx_with_a_parent_locator_opens_nothing_outside(tmp_path: Path, root_fs: Path) -> None:
    _tools("qemu-img", "strace")
    outside = tmp_path / "outside"
    outside.mkdir()
    parent = small_images.convert(root_fs, outside / "host-disk.vhdx", "vhdx")
    image = small_images.convert(root_fs, tmp_path / "child.vhdx", "vhdx")
    _vhdx_with_parent(image, "outside/host-disk.vhdx", str(parent))
    one_line_inconclusive(image, "parent/backing file", "outside/host-disk.vhdx", trace=tmp_path / "trace")
    never_opened(tmp_path / "trace", "host-disk")


def test_a_qcow2_with_a_backing_file_opens_nothing_beside_it(tmp_path: Path, root_fs: Path) -> None:
    """dissect opens a backing file named beside the image; imagelint gives it no name to look beside."""
    _tools("qemu-img", "strace")
    base = root_fs.rename(tmp_path / "base-disk.raw")
    overlay = tmp_path / "overlay.qcow2"
    small_images.run(
        "qemu-img", "create", "-q", "-f", "qcow2", "-b", base.name, "-F", "raw", overlay, cwd=tmp_path
    )
    one_line_inconclusive(overlay, "parent/backing file", "base-disk.raw", trace=tmp_path / "trace")
    never_opened(tmp_path / "trace", "base-disk")
    base.unlink()  # gone or there, the answer is the same
    one_line_inconclusive(overlay, "parent/backing file", "base-disk.raw")


def test_a_fifo_or_a_device_given_as_the_image_is_refused_unopened(tmp_path: Path) -> None:
    fifo = tmp_path / "image.fifo"
    os.mkfifo(fifo)
    one_line_inconclusive(fifo, "is a FIFO, not a disk image file")
    one_line_inconclusive(Path("/dev/null"), "is a character device, not a disk image file")
    # the opener called directly (as other commands do) neither blocks on the FIFO
    probe = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom imagelint.errors import ImageLintError\n"
         "from imagelint.targets.disk import open_disk_file\ntry:\n    open_disk_file(sys.argv[1])\n"
         "except ImageLintError as exc:\n    print(exc)", str(fifo)],
        capture_output=True, text=True, timeout=TIMEOUT, check=True,
    )  # fmt: skip
    assert "is a FIFO" in probe.stdout


# -- counts that lie ----------------------------------------------------------------------------


def test_a_qcow2_l1_table_of_2_to_the_25(tmp_path: Path, root_fs: Path) -> None:
    _tools("qemu-img")
    image = small_images.convert(root_fs, tmp_path / "l1.qcow2", "qcow2")
    assert image.stat().st_size < 16 << 20
    small_images.patch(image, 36, struct.pack(">I", 1 << 25))  # l1_size
    one_line_inconclusive(image, "qcow2: corrupt header: l1_size 33554432")


def test_a_gpt_of_0xffffffff_entries(tmp_path: Path, root_fs: Path) -> None:
    _tools("sfdisk")
    disk = small_images.partitioned(tmp_path / "gpt.raw", "gpt", root_fs)
    small_images.patch(disk, 512 + 80, struct.pack("<II", 0xFFFFFFFF, 0))  # count, entry size
    one_line_inconclusive(disk, "corrupt GPT: partition_entry_size 0")
    small_images.patch(disk, 512 + 80, struct.pack("<II", 0xFFFFFFFF, 128))
    one_line_inconclusive(disk, "corrupt GPT: partition_table_count 4294967295")


def test_an_lvm_pv_with_a_huge_metadata_area(tmp_path: Path, root_fs: Path) -> None:
    _tools("pvcreate", "losetup")
    need(loop_devices_work(), "LVM on a loop device needs root and a loop device this machine lends")
    disk = small_images.lvm(tmp_path / "lvm.raw", root_fs)
    assert run_cli("audit", str(disk), "--no-builtin-rules").returncode == 0
    # the metadata area header is at 4096; its first raw location's size at +40+8
    small_images.patch(disk, 4096 + 48, struct.pack("<Q", 1 << 40))
    one_line_inconclusive(disk, "corrupt LVM: metadata of 1099511627776 bytes")


@pytest.mark.parametrize("order", ["repeated", "ascending"])
def test_an_ext4_extent_tree_fanned_out_to_157_million_extents(tmp_path: Path, order: str) -> None:
    """/etc/fstab (read at open): 30 bytes whose tree is 4 index entries to a block of 340, to a block
    of 340, to a leaf of 340 extents: 4 x 340^3 extents, each block named again and again (each
    index entry starting at logical block 0, or at 0, 1, 2...)."""
    _tools("mke2fs", "debugfs")
    fs = small_images.ext(
        tmp_path / "fan.ext4", {"/etc/fstab": "# thirty bytes of fstab text\n", "/spare": "x" * 12288}
    )
    a, b, c = small_images.blocks_of(fs, "/spare")[:3]
    block_size = small_images.block_size(fs)
    room = (block_size - 12) // 12

    def node(depth: int, child: int, entries: int) -> bytes:
        head = struct.pack("<HHHHI", 0xF30A, entries, entries, depth, 0)
        if depth == 0:
            body = b"".join(struct.pack("<IHHI", i, 1, 0, a) for i in range(entries))
        else:
            body = b"".join(
                struct.pack("<IIHH", i if order == "ascending" else 0, child, 0, 0) for i in range(entries)
            )
        return head + body

    small_images.patch(fs, c * block_size, node(0, 0, room))
    small_images.patch(fs, b * block_size, node(1, c, room))
    small_images.patch(fs, a * block_size, node(2, b, room))
    small_images.patch(fs, small_images.inode_offset(fs, "/etc/fstab") + 40, node(3, a, 4))
    small_images.reseal(fs, "/etc/fstab")
    one_line_inconclusive(fs, "/etc/fstab", "corrupt block map")


@pytest.mark.parametrize("fstype", ["ext2", "ext4"])
def test_an_inode_claiming_a_tebibyte(tmp_path: Path, fstype: str) -> None:
    """A 1 TiB /etc/fstab (read at open) and a 1 TiB journal file in an 8 MiB filesystem: ext2's
    indirect map would be a list of 2^28 block numbers; the reads and the map stay bounded."""
    _tools("mke2fs", "debugfs")
    journal = "/var/log/journal/0123456789abcdef0123456789abcdef/system.journal"
    fs = small_images.ext(
        tmp_path / f"tib.{fstype}", {"/etc/fstab": "# fstab\n", journal: "LPKSHHRH"}, fstype=fstype
    )
    small_images.set_inode_size(fs, journal, 1 << 40)
    run = measured("audit", str(fs))
    print(
        f"{fs.name} (1 TiB journal): exit {run.returncode}, peak RSS {run.peak_kib} KiB, {run.seconds:.2f} s"
    )
    assert run.returncode == 3, (run.returncode, run.stderr[-2000:])
    assert "INCONCLUSIVE" in run.stdout and run.peak_mib <= MAX_RSS_MIB, run.peak_mib
    small_images.set_inode_size(fs, "/etc/fstab", 1 << 40)
    one_line_inconclusive(fs, "/etc/fstab", "read limit")


@pytest.mark.parametrize("mib", [128, 512])
def test_a_stream_optimized_vmdk_grain_that_inflates_to_many_mib(tmp_path: Path, mib: int) -> None:
    """The grain holding the disk's first sectors replaced by deflate that inflates to 128 MiB (its
    marker's length fits a grain: the inflating stops at the grain) or to 512 MiB (the marker's
    length does not: refused unread)."""
    _tools("mke2fs", "qemu-img")
    fs = small_images.ext(tmp_path / "root.ext4", {"/noise": os.urandom(3 << 20).hex()[: 3 << 20]})
    image = small_images.convert(fs, tmp_path / "bomb.vmdk", "vmdk", "-o", "subformat=streamOptimized")
    size = image.stat().st_size
    with open(image, "rb") as f:
        (directory,) = struct.unpack_from("<Q", f.read(512), 56)
        if directory == (1 << 64) - 1:  # the grain directory's place is in the footer
            f.seek(size - 1024)
            (directory,) = struct.unpack_from("<Q", f.read(512), 56)
        f.seek(directory * 512)
        (table,) = struct.unpack("<I", f.read(4))
        f.seek(table * 512)
        (grain,) = struct.unpack("<I", f.read(4))
    squeeze = zlib.compressobj(9)
    bomb = b"".join(squeeze.compress(bytes(1 << 20)) for _ in range(mib)) + squeeze.flush()
    assert grain * 512 + 12 + len(bomb) < size - 4096
    small_images.patch(image, grain * 512, struct.pack("<QI", 0, len(bomb)) + bomb)
    one_line_inconclusive(image, "")


@pytest.mark.slow
@pytest.mark.parametrize(("links", "files"), [(100, 1), (1, 50)])
def test_an_ext4_directory_cycle_is_walked_within_memory(tmp_path: Path, links: int, files: int) -> None:
    """/etc/x holds ``links`` entries naming /etc itself (debugfs ``ln``: a directory hard link, so
    /etc/x/u0/x/u0/... never ends) and ``files`` files: the walk of /etc (IL109) stops at 2,048
    levels, inconclusive. A wide cycle held each pending subdirectory's path of thousands of
    components (935 MiB at 100 links), a narrow one every walked entry (193 MiB at 50 files).
    About 2 s each since a walk's next directory is found from its parent's cached listing (a
    descent from the root for each of 2,048 levels took 30 s, and 60 s under a loaded CI)."""
    _tools("mke2fs", "debugfs")
    fs = small_images.ext(tmp_path / "cycle.ext4", {f"/etc/x/f{i}": "x\n" for i in range(files)})
    links_in = "".join(f"ln /etc /etc/x/u{i}\n" for i in range(links))
    subprocess.run(
        ["debugfs", "-w", "-f", "-", str(fs)], input=links_in, text=True, check=True, capture_output=True
    )
    run = measured("audit", str(fs))
    print(f"{links} links, {files} files: exit {run.returncode}, peak RSS {run.peak_mib:.0f} MiB")
    assert run.returncode == 3 and "more than 2048 directory levels deep" in run.stdout, run.stdout[-2000:]
    assert run.peak_mib <= MAX_RSS_MIB, f"peak RSS of the process tree {run.peak_mib:.0f} MiB"
