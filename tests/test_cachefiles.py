"""Which caches IMAGELINT_NO_CACHE turns off (imagelint/cachefiles.py)."""

from __future__ import annotations

import pytest

from imagelint import cachefiles


@pytest.mark.parametrize(
    ("value", "off"),
    [
        ("", set()),
        ("0", set()),
        ("1", {"audits", "blocks", "packs"}),
        ("yes", {"audits", "blocks", "packs"}),
        ("audits,blocks", {"audits", "blocks"}),
        (" packs ", {"packs"}),
        ("packs,typo", {"audits", "blocks", "packs"}),  # a name it does not know: every cache, to be safe
    ],
)
def test_imagelint_no_cache_names_the_caches_it_turns_off(
    monkeypatch: pytest.MonkeyPatch, value: str, off: set[str]
) -> None:
    monkeypatch.setenv("IMAGELINT_NO_CACHE", value)
    assert {name for name in cachefiles.CACHES if cachefiles.off(name)} == off
    assert {name for name in cachefiles.CACHES if cachefiles.cache_root(name) is None} == off
