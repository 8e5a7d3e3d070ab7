"""Drop-in discovery and merge order, against the service manager's own loader.

``systemd-analyze --root=ROOT verify UNIT`` loads a unit with the manager's code (fragment, then
drop-ins in order). Every file here carries a key the manager does not know, so the manager names
each file it loads, in load order, with the line of the key ("path:line: Unknown key 'ProbeN' ...").
That list must equal our fragment + drop-ins, and our line numbers must equal its line numbers.
(The manager may name a file through ``/lib`` where we name it through ``/usr/lib``: paths are
compared after resolving them inside the image.)
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from imagelint.facts.systemd import UnitIndex
from imagelint.targets.rootfs import RootfsTarget
from tests.facts.systemd.crafted import ETC, RUN, VENDOR, link, skeleton, write
from tests.facts.systemd.oracle import compare
from tests.support import need

UNKNOWN = re.compile(r"^(?P<path>/\S+):(?P<line>\d+): Unknown key '(?P<key>Probe\w+)'", re.M)


def _probe(n: int, extra: str = "") -> str:
    return f"[Service]\n{extra}Probe{n}=yes\n"


def _verify(root: Path, unit: str) -> list[tuple[str, int, str]]:
    proc = subprocess.run(
        ["systemd-analyze", f"--root={root}", "--man=no", "--recursive-errors=no", "verify", unit],
        capture_output=True,
        text=True,
        check=False,
    )
    target = RootfsTarget(root)
    found = []
    for m in UNKNOWN.finditer(proc.stderr + proc.stdout):
        found.append((target.resolve(m["path"][len(str(root)) :]), int(m["line"]), m["key"]))
    assert found, f"systemd-analyze printed nothing usable:\n{proc.stderr}"
    return found


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    need(shutil.which("systemd-analyze") is not None, "systemd-analyze is not installed")
    root = skeleton(tmp_path / "root")
    write(root, "bin/true", "")
    (root / "bin/true").chmod(0o755)
    main = "[Unit]\nDescription=x\n\n[Service]\nExecStart=/bin/true\nProbe0=yes\n"
    write(root, f"{VENDOR}/foo-bar-baz.service", main)
    write(root, f"{VENDOR}/service.d/10-type.conf", _probe(1))
    write(root, f"{VENDOR}/foo-.service.d/20-prefix.conf", _probe(2))
    write(root, f"{VENDOR}/foo-bar-.service.d/20-prefix.conf", _probe(3))  # more specific: wins
    write(root, f"{VENDOR}/foo-bar-.service.d/25-prefix.conf", _probe(4))
    write(root, f"{VENDOR}/foo-bar-baz.service.d/30-same.conf", _probe(5))
    write(root, f"{ETC}/foo-bar-baz.service.d/30-same.conf", _probe(6, "# etc wins over vendor\n"))
    write(root, f"{RUN}/foo-bar-baz.service.d/05-run.conf", _probe(7))
    write(root, f"{VENDOR}/foo-bar-baz.service.d/40-masked.conf", _probe(8))
    link(root, f"{ETC}/foo-bar-baz.service.d/40-masked.conf", "/dev/null")
    write(
        root,
        f"{VENDOR}/foo-bar-baz.service.d/50-cont.conf",
        "[Service]\nEnvironment=A=1 \\\n  B=2\nProbe9=yes\n",
    )
    link(root, f"{VENDOR}/fbz-alias.service", "foo-bar-baz.service")
    write(root, f"{VENDOR}/fbz-alias.service.d/60-alias.conf", _probe(10))
    write(root, f"{VENDOR}/tmpl@.service", main.replace("Probe0", "Probe20"))
    write(root, f"{VENDOR}/tmpl@.service.d/10-template.conf", _probe(21))
    write(root, f"{VENDOR}/tmpl@inst.service.d/20-instance.conf", _probe(22))
    write(root, f"{VENDOR}/tmpl@inst.service.d/10-template.conf", _probe(23))  # instance's wins
    # prefix drop-ins of a template: "a-b-" before "a-b-@" before "a-" and "a-@"
    write(root, f"{VENDOR}/a-b-c@.service", main.replace("Probe0", "Probe30"))
    for n, d in enumerate(
        ("a-.service.d", "a-b-.service.d", "a-@.service.d", "a-b-@.service.d", "a-b-c@x-.service.d")
    ):
        write(root, f"{VENDOR}/{d}/60-same.conf", _probe(31 + n))
        write(root, f"{VENDOR}/{d}/6{n + 1}-own.conf", _probe(41 + n))
    return root


@pytest.mark.parametrize(
    "unit", ["foo-bar-baz.service", "tmpl@inst.service", "a-b-c@x-y.service", "a-b-c@.service"]
)
def test_dropins_and_lines_match_the_manager(tree: Path, unit: str) -> None:
    expected = _verify(tree, unit)
    index = UnitIndex.build(RootfsTarget(tree))
    loaded = index.get(unit)
    if loaded is None:  # an instance that no link mentions is still loadable by name
        loaded = index.load(unit)
    assert loaded is not None
    target = RootfsTarget(tree)
    ours = [(target.resolve(a.path), a.line, a.key) for a in loaded.assignments if a.key.startswith("Probe")]
    assert ours == expected
    files = [target.resolve(p) for p in (loaded.fragment, *loaded.dropins) if p is not None]
    assert files == list(dict.fromkeys(p for p, _, _ in expected))


def test_merged_values(tree: Path) -> None:
    index = UnitIndex.build(RootfsTarget(tree))
    unit = index["foo-bar-baz.service"]
    env = unit.get("Service", "Environment")
    assert [(a.value, a.line) for a in env] == [("A=1    B=2", 2)]
    assert unit.get_value("Service", "ExecStart") == "/bin/true"
    assert "fbz-alias.service" in unit.aliases
    assert index["fbz-alias.service"].unit_id == "foo-bar-baz.service"
    assert index["fbz-alias.service"].fragment == unit.fragment
    # the /etc drop-in linked to /dev/null dangles in this tree (it has no /dev): systemctl calls
    # both names "bad", and so must we
    result = compare(tree, index)
    assert result.mismatches == []
    assert index["foo-bar-baz.service"].state == "bad"
