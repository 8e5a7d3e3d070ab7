"""The units table written directly is the table rich lays out with the same settings, byte for byte,
on real images and on hostile unit names; rich keeps what the direct writer does not do (colour,
folding past PLAIN_WIDTH)."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagelint.commands.units import listing_of
from imagelint.formats import units_table
from imagelint.formats.units_json import units_document
from tests.support import os_root


def _both(document: dict, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    direct = units_table.render_text(document, terminal=False)
    with monkeypatch.context() as m:
        m.setattr(units_table, "_plain", lambda _document: None)
        laid_out = units_table.render_text(document, terminal=False)
    return direct, laid_out


@pytest.mark.parametrize("image", ["debian_rootfs", "cloud_rootfs"])
def test_the_direct_table_is_rich_s_table(image: str, request: pytest.FixtureRequest, monkeypatch) -> None:
    root: Path = request.getfixturevalue(image)
    document = units_document(listing_of(str(root)))
    direct, laid_out = _both(document, monkeypatch)
    assert len(document["units"]) > 100
    assert direct == laid_out


def test_markup_emoji_codes_and_wide_roots_lay_out_alike(tmp_path: Path, monkeypatch) -> None:
    unit = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
    names = ["a:smile:b.service", "x@y.service", "a\\x2db.service", "c[bold]d.service"]
    tree = {f"/etc/systemd/system/{n}": unit for n in names}
    tree |= {f"/etc/systemd/system/multi-user.target.wants/{n}": {"link": f"../{n}"} for n in names}
    document = units_document(listing_of(str(os_root(tmp_path / "image-漢字", tree))))
    direct, laid_out = _both(document, monkeypatch)
    assert direct == laid_out
    assert "a:smile:b.service" in direct and "image-漢字" in direct


def test_a_table_wider_than_the_plain_width_is_left_to_rich(tmp_path: Path) -> None:
    tree = {"/etc/systemd/system/a.service": "[Service]\nExecStart=/bin/true\n"}
    dropins = [f"/etc/systemd/system/a.service.d/{i:02d}-{'x' * 20}.conf" for i in range(30)]
    tree |= {path: "[Service]\n" for path in dropins}
    document = units_document(listing_of(str(os_root(tmp_path / "image", tree))))
    assert units_table._plain(document) is None  # 30 drop-ins: the row is over PLAIN_WIDTH
    text = units_table.render_text(document, terminal=False)
    assert all(path.rsplit("/", 1)[1] in text.replace("\n", "").replace(" ", "") for path in dropins)
