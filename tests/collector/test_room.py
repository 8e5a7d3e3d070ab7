"""A host's bundle is held against the free space of the real filesystem it goes to, before a byte
of it is written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from imagelint.collector.room import RESERVE, NoRoomError, check_room


def test_a_bundle_that_would_leave_less_than_the_reserve_is_refused(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    if free < 2 * RESERVE:
        pytest.skip(f"{tmp_path} has {free:,} bytes free: too few to tell fitting from not")
    check_room(tmp_path, RESERVE // 2, "ssh://h")  # fits, with the reserve beside it
    with pytest.raises(NoRoomError) as refused:
        check_room(tmp_path, free, "ssh://h")  # fits alone, not with the reserve beside it
    assert refused.value.where == "ssh://h" and "no room for its bundle" in refused.value.message
    assert refused.value.exit_code == 3
    assert list(tmp_path.iterdir()) == []  # nothing written
