"""Lines at systemd 252's length limit (``LONG_LINE_MAX``, 1 MiB), against real ``systemctl --root``.

systemd's ``read_line()`` refuses a physical line of 1,048,576 bytes or more (not counting its end
of line; a leading byte order mark counts), and ``config_parse()`` refuses a continued line whose
pieces add up to more than 1,048,576 bytes; either makes the unit file ``bad``. Every case is one
unit of a single tree, so one ``list-unit-files`` and one ``is-enabled`` answer for all of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from imagelint.facts.systemd import UnitIndex, parse_unit_bytes
from imagelint.facts.systemd.parser import LONG_LINE_MAX
from imagelint.targets.rootfs import RootfsTarget
from tests.facts.systemd.oracle import compare, is_enabled, systemctl_available
from tests.support import need

MiB = LONG_LINE_MAX
BOM = b"\xef\xbb\xbf"
INSTALL = b"\n[Install]\nWantedBy=multi-user.target\n"


def _line(n: int, key: bytes = b"Description=") -> bytes:
    """A ``Key=xxx`` line of exactly ``n`` bytes."""
    return key + b"x" * (n - len(key))


def _continued(first: int, second: int) -> bytes:
    """A line of ``first`` bytes plus a backslash, continued by ``second`` bytes: ``first + 1 + second``."""
    return _line(first) + b"\\\n" + b"y" * second


# unit name -> (content, what systemctl is-enabled says)
CASES: dict[str, tuple[bytes, str]] = {
    "lf-1048574": (b"[Unit]\n" + _line(MiB - 2) + b"\n" + INSTALL, "disabled"),
    "lf-1048575": (b"[Unit]\n" + _line(MiB - 1) + b"\n" + INSTALL, "disabled"),
    "lf-1048576": (b"[Unit]\n" + _line(MiB) + b"\n" + INSTALL, "bad"),
    "lf-1048577": (b"[Unit]\n" + _line(MiB + 1) + b"\n" + INSTALL, "bad"),
    "crlf-1048575": (b"[Unit]\r\n" + _line(MiB - 1) + b"\r\n" + INSTALL, "disabled"),
    "crlf-1048576": (b"[Unit]\r\n" + _line(MiB) + b"\r\n" + INSTALL, "bad"),
    "cr-1048575": (b"[Unit]\r" + _line(MiB - 1) + b"\r" + INSTALL, "disabled"),
    "nul-1048575": (b"[Unit]\n" + _line(MiB - 1) + b"\0" + INSTALL, "disabled"),
    "install-last-1048575": (INSTALL + _line(MiB - 1), "disabled"),
    "install-last-1048576": (INSTALL + _line(MiB), "bad"),
    "comment-1048575": (b"[Unit]\n#" + b"x" * (MiB - 2) + b"\n" + INSTALL, "disabled"),
    "comment-1048576": (b"[Unit]\n#" + b"x" * (MiB - 1) + b"\n" + INSTALL, "bad"),
    "bom-1048575": (BOM + b"#" + b"x" * (MiB - 5) + b"\n" + INSTALL, "disabled"),
    "bom-1048576": (BOM + b"#" + b"x" * (MiB - 4) + b"\n" + INSTALL, "bad"),
    # the continued line is its pieces, each backslash made a space: 1 MiB is still fine
    "continued-1048576": (b"[Unit]\n" + _continued(MiB // 2, MiB // 2 - 1) + b"\n" + INSTALL, "disabled"),
    "continued-1048577": (b"[Unit]\n" + _continued(MiB // 2, MiB // 2) + b"\n" + INSTALL, "bad"),
    # bytes, not characters: 2-byte "é" twice over the limit
    "continued-utf8": (
        b"[Unit]\nDescription=" + "é".encode() * (MiB // 4) + b"\\\n" + b"y" * (MiB // 2) + b"\n" + INSTALL,
        "bad",
    ),
    # a byte order mark is dropped after the comment test: "BOM# ...\" continues into [Install]
    "bom-hides-comment": (BOM + b"# note \\\n" + INSTALL.lstrip(b"\n"), "static"),
    # ... and from the first line that has one, not only the first line
    "bom-later": (b"[Unit]\nDescription=x\n" + BOM + INSTALL.lstrip(b"\n"), "disabled"),
    "bom-twice": (BOM + b"[Unit]\n" + BOM + INSTALL.lstrip(b"\n"), "static"),
}


@pytest.fixture(scope="module")
def long_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("long-lines") / "root"
    units = root / "etc/systemd/system"
    units.mkdir(parents=True)
    for name, (content, _) in CASES.items():
        (units / f"{name}.service").write_bytes(content)
    return root


def test_line_lengths_match_systemctl(long_tree: Path) -> None:
    need(systemctl_available(), "systemctl (the oracle) is not installed")
    index = UnitIndex.build(RootfsTarget(long_tree))
    result = compare(long_tree, index)
    assert result.compared_list == len(CASES)
    assert result.mismatches == [], "\n".join(result.mismatches)
    answers = is_enabled(long_tree, [f"{name}.service" for name in CASES])
    for name, (_, expected) in CASES.items():
        theirs = "bad" if answers[f"{name}.service"].startswith("error:") else answers[f"{name}.service"]
        assert (theirs, index[f"{name}.service"].state) == (expected, expected), name


@pytest.mark.parametrize(
    ("size", "fatal"), [(MiB - 2, False), (MiB - 1, False), (MiB, True), (MiB + 1, True)]
)
def test_parser_line_limit(size: int, fatal: bool) -> None:
    parsed = parse_unit_bytes(b"[Unit]\n" + _line(size) + b"\n", "/x.service")
    assert (parsed.fatal is not None) == fatal
    if fatal:
        assert parsed.fatal is not None and parsed.fatal.line == 2
    else:
        assert len(parsed.assignments[0].value) == size - len("Description=")
