"""The unit index at scale: bounded directory walks, memory per unit, and the streamed ``units`` JSON.

* a unit directory of more than ``MAX_DIR_ENTRIES`` entries is an ImageReadError naming it (the run
  is inconclusive, ``imagelint units`` exits 3), wherever it is met: a search directory, a
  ``.wants/`` directory, a drop-in directory;
* the index keeps no unit's assignments it was not asked for (those of units walked at boot
  excepted), and what it keeps per unit stays small;
* ``imagelint units --format json`` writes, unit by unit, exactly what ``json.dumps`` of the whole
  document would.
"""

from __future__ import annotations

import gc
import io
import json
import tracemalloc
from pathlib import Path

import pytest
import typer

from imagelint.commands.units import listing_of
from imagelint.errors import ExitCode, ImageReadError
from imagelint.facts.systemd import UnitIndex, sources
from imagelint.formats.units_json import units_document, write_units_json
from imagelint.targets.rootfs import RootfsTarget
from tests.facts.systemd.crafted import ETC, VENDOR, link, write
from tests.support import os_root, run_cli

SERVICE = (
    "[Unit]\nDescription=unit {i}\n\n[Service]\nExecStart=/bin/true\n\n"
    "[Install]\nWantedBy=multi-user.target\n"
)


def _tree(root: Path, count: int, *, enable_every: int = 10) -> Path:
    os_root(root)  # the commands list its units only as an OS root's
    write(root, f"{VENDOR}/multi-user.target", "[Unit]\nDescription=Multi-User\n")
    link(root, f"{VENDOR}/default.target", "multi-user.target")
    for i in range(count):
        write(root, f"{ETC}/u{i:05d}.service", SERVICE.format(i=i))
        if i % enable_every == 0:
            link(root, f"{ETC}/multi-user.target.wants/u{i:05d}.service", f"/{ETC}/u{i:05d}.service")
    return root


@pytest.mark.parametrize(
    ("where", "directory"),
    [
        ("search", f"/{ETC}"),
        ("wants", f"/{ETC}/multi-user.target.wants"),
        ("dropins", f"/{ETC}/u00000.service.d"),
    ],
)
def test_too_large_directory_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, directory: str
) -> None:
    root = _tree(tmp_path, 12 if where == "search" else 3, enable_every=1)
    if where == "wants":
        for i in range(12):
            link(root, f"{ETC}/multi-user.target.wants/x{i}.service", f"/{ETC}/u00000.service")
    if where == "dropins":
        for i in range(12):
            write(root, f"{ETC}/u00000.service.d/{i:02d}.conf", "[Unit]\nDescription=x\n")
    index = UnitIndex.build(RootfsTarget(root))  # fine under the real limit
    assert "u00000.service" in index
    monkeypatch.setattr(sources, "MAX_DIR_ENTRIES", 10)
    with pytest.raises(ImageReadError) as caught:
        UnitIndex.build(RootfsTarget(root))
    assert caught.value.path == directory
    assert caught.value.exit_code is ExitCode.INCONCLUSIVE
    assert "more than 10 entries" in str(caught.value) and "\n" not in str(caught.value)


def test_units_command_exits_inconclusive_on_a_too_large_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from imagelint.cli.app import units

    root = _tree(tmp_path, 12)
    monkeypatch.setattr(sources, "MAX_DIR_ENTRIES", 10)
    with pytest.raises(typer.Exit) as caught:
        units(str(root), ["json"])
    assert caught.value.exit_code == ExitCode.INCONCLUSIVE
    err = capsys.readouterr().err.strip()
    assert err == f"imagelint: error: /{ETC}: more than 10 entries: too large to index; not judged"


def test_more_units_than_the_index_holds_is_inconclusive_before_any_is_parsed(tmp_path: Path) -> None:
    from imagelint.facts.systemd.index import MAX_UNITS

    root = os_root(tmp_path / "image")
    (root / ETC).mkdir(parents=True)
    for i in range(MAX_UNITS + 1):  # a crafted image: hostile by count alone
        (root / ETC / f"u{i}.service").write_text("[Service]\nExecStart=/bin/true\n")
    proc = run_cli("units", str(root))
    assert proc.returncode == 3
    reason = f"more than {MAX_UNITS:,} units in the image: too many to index; not judged"
    assert proc.stderr == f"imagelint: error: /{ETC}: {reason}\n"
    assert proc.stdout == ""


def test_index_keeps_only_the_assignments_asked_for(tmp_path: Path) -> None:
    index = UnitIndex.build(RootfsTarget(_tree(tmp_path, 40)))
    held = {u.name for u in index if u.loaded is not None and u.loaded._assignments is not None}
    assert held == {u.name for u in index.boot_units()}  # the boot walk read those, and only those
    unit = index["u00001.service"]
    assert unit.boot_chain is None and unit.name not in held
    assert unit.get_value("Service", "ExecStart") == "/bin/true"
    assert [(a.section, a.key, a.line) for a in unit.assignments] == [
        ("Unit", "Description", 2),
        ("Service", "ExecStart", 5),
        ("Install", "WantedBy", 8),
    ]
    assert unit.loaded is not None and unit.loaded._assignments is not None


@pytest.mark.slow
@pytest.mark.serial  # tracemalloc counts every thread's allocations: a worker's moto server would add its own
def test_memory_per_unit_stays_small(tmp_path: Path) -> None:
    root = _tree(tmp_path, 3000)
    target = RootfsTarget(root)
    gc.collect()
    tracemalloc.start()
    try:
        index = UnitIndex.build(target)
        gc.collect()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(index.units) == 3002  # and multi-user.target, default.target
    per_unit, peak_per_unit = held / 3000, peak / 3000
    print(f"{per_unit:.0f} B held and {peak_per_unit:.0f} B at the peak per unit")
    # before the index was made lazy: about 4,100 B held per unit, 4,500 at the peak (now ~750, ~1,200)
    assert per_unit < 1500 and peak_per_unit < 2000


def _same_json(root: Path) -> None:
    listing = listing_of(str(root))
    expected = json.dumps(units_document(listing), indent=1, ensure_ascii=False) + "\n"
    out = io.StringIO()
    write_units_json(listing, out)
    assert out.getvalue() == expected


def test_streamed_json_is_the_document(tmp_path: Path, debian_rootfs: Path) -> None:
    _same_json(debian_rootfs)
    _same_json(os_root(tmp_path / "empty"))  # no units: an OS root's marks only
    crafted = _tree(tmp_path / "crafted", 3)
    write(crafted, f"{ETC}/u00001.service.d/a.conf", '[Unit]\nDescription="quoted" é \\ tab\t\n')
    link(crafted, f"{ETC}/alias.service", f"/{ETC}/u00002.service")
    write(crafted, f"{ETC}/broken.service", b"\xff[Unit\n")
    link(crafted, f"{ETC}/dangling.service", "/nowhere.service")
    _same_json(crafted)
