"""Where lines end, against real ``systemctl --root`` (systemd 252's ``read_line()``).

One end of line is a run of CR, LF and NUL bytes in which no byte repeats and nothing follows a NUL:
``\\n\\r`` and ``\\r\\0`` are one end of line, ``\\n\\n`` and ``\\0\\n`` are two. Each case continues a
line (``Description=x \\``) across one of these runs into ``[Install]``: where the run is one end
of line, ``[Install]`` is swallowed by the continued line and the unit is ``static``; where it is
two, the empty line between ends the continued line, ``[Install]`` is a header, and the unit
``disabled``. Found by fuzzing against systemctl (tests/facts/systemd/test_fuzz_parser.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from imagelint.facts.systemd import UnitIndex
from imagelint.targets.rootfs import RootfsTarget
from tests.facts.systemd.oracle import list_unit_files, systemctl_available
from tests.support import need

ONE = ("\n", "\r", "\0", "\r\n", "\n\r", "\r\0", "\n\0", "\r\n\0", "\n\r\0")
TWO = ("\n\n", "\r\r", "\0\0", "\0\n", "\0\r", "\r\n\r", "\n\r\n", "\n\r\r", "\r\0\n")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("line-ends")
    units = root / "etc/systemd/system"
    units.mkdir(parents=True)
    for i, end in enumerate(ONE + TWO):
        content = b"[Unit]\nDescription=x \\" + end.encode() + b"[Install]\nWantedBy=multi-user.target\n"
        (units / f"end{i:02d}.service").write_bytes(content)
    return root


def test_line_ends_match_systemctl(tree: Path) -> None:
    need(systemctl_available(), "systemctl (the oracle) is not installed")
    theirs = list_unit_files(tree)
    index = UnitIndex.build(RootfsTarget(tree))
    for i, end in enumerate(ONE + TWO):
        name = f"end{i:02d}.service"
        expected = "static" if end in ONE else "disabled"
        assert (theirs[name][0], index[name].state) == (expected, expected), repr(end)
