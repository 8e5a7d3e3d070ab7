"""The unit-file syntax, unit names and specifiers.

How systemctl *acts* on this syntax is checked against systemctl in test_differential (the syntax
tree) and against the manager in test_dropins; these tests pin down the data we hand to rules:
values, sections and line numbers, which no offline systemd tool prints.
"""

from __future__ import annotations

import pytest

from imagelint.facts.systemd import names, parse_unit_bytes, split_words
from imagelint.facts.systemd.parser import WordSyntaxError
from imagelint.facts.systemd.specifiers import SpecifierError, expand


def _values(data: bytes) -> list[tuple[str, str, str, int]]:
    parsed = parse_unit_bytes(data, "/x.service")
    return [(a.section, a.key, a.value, a.line) for a in parsed.assignments]


def test_sections_comments_and_lines() -> None:
    data = (
        b"# head\n[Unit]\nDescription = hello world \n; semi\n\n"
        b"[Service]\nExecStart=/bin/a\nExecStart=/bin/b\n"
    )
    assert _values(data) == [
        ("Unit", "Description", "hello world", 3),
        ("Service", "ExecStart", "/bin/a", 7),
        ("Service", "ExecStart", "/bin/b", 8),
    ]


def test_continuation_keeps_the_first_line_and_skips_comment_lines() -> None:
    data = b"[Service]\nExecStart=/bin/a \\\n  --flag \\\n# not part of it\n  --other\nUser=x\n"
    assert _values(data) == [
        ("Service", "ExecStart", "/bin/a    --flag    --other", 2),
        ("Service", "User", "x", 6),
    ]


def test_escaped_backslash_does_not_continue() -> None:
    assert _values(b"[S]\nA=x\\\\\nB=y\n") == [("S", "A", "x\\\\", 2), ("S", "B", "y", 3)]


def test_continuation_at_end_of_file_is_kept() -> None:
    assert _values(b"[S]\nA=x \\") == [("S", "A", "x", 2)]


def test_line_endings_and_bom() -> None:
    assert _values(b"\xef\xbb\xbf[S]\r\nA=1\r\nB=2\rC=3\n") == [
        ("S", "A", "1", 2),
        ("S", "B", "2", 3),
        ("S", "C", "3", 4),
    ]


def test_warnings_and_fatal_errors() -> None:
    parsed = parse_unit_bytes(b"Orphan=1\n[S]\nno equals here\n=value\n[Broken\nA=1\n", "/y.service")
    assert [w.line for w in parsed.warnings] == [1, 3, 4]
    assert parsed.fatal is not None and parsed.fatal.line == 5
    assert parsed.assignments == []  # nothing after the fatal line is taken

    bad = parse_unit_bytes(b"[S]\nA=ok\n# \xff in a comment is fine\nB=\xff\nC=never\n", "/z.service")
    assert [a.key for a in bad.assignments] == ["A"]
    assert bad.fatal is not None and bad.fatal.line == 4

    noncharacter = parse_unit_bytes("[S]\nA=x\ufffey\n".encode(), "/n.service")
    assert noncharacter.fatal is not None

    long_line = parse_unit_bytes(b"[S]\nA=" + b"a" * (1024 * 1024 + 1) + b"\n", "/l.service")
    assert long_line.fatal is not None and long_line.fatal.line == 2


def test_many_warnings_are_summarised() -> None:
    parsed = parse_unit_bytes(b"junk\n" * 50, "/g.service")
    assert len(parsed.warnings) == 6
    assert "45 more" in parsed.warnings[-1].message


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("a b  c", ["a", "b", "c"]),
        ('"a b" c', ["a b", "c"]),
        ("'x y'z", ["x yz"]),
        ("a\\ b", ["a\\ b"]),
        ("", []),
    ],
)
def test_split_words(value: str, words: list[str]) -> None:
    assert split_words(value) == words


def test_split_words_refuses_open_quotes() -> None:
    with pytest.raises(WordSyntaxError):
        split_words('"open')


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("ssh.service", names.NameKind.PLAIN),
        ("getty@.service", names.NameKind.TEMPLATE),
        ("getty@tty1.service", names.NameKind.INSTANCE),
        ("a@b@c.service", names.NameKind.INSTANCE),
        ("-.mount", names.NameKind.PLAIN),
        ("@x.service", None),
        ("x.nope", None),
        ("sp ace.service", None),
        (".service", None),
        ("x" * 250 + ".service", None),
    ],
)
def test_name_kinds(name: str, kind: names.NameKind | None) -> None:
    assert names.name_kind(name) is kind


def test_name_helpers() -> None:
    assert names.template_of("getty@tty1.service") == "getty@.service"
    assert names.instance_of("a@b@c.service") == "b@c"
    assert names.replace_instance("getty@.service", "tty2") == "getty@tty2.service"
    assert names.dash_prefixes("foo-bar-baz.service") == ["foo-bar-.service", "foo-.service"]
    assert names.dash_prefixes("a-b-c@.service") == [
        "a-b-.service",
        "a-b-@.service",
        "a-.service",
        "a-@.service",
    ]
    assert names.dash_prefixes("a-b-c@x-y.service") == names.dash_prefixes("a-b-c@.service")
    assert names.dash_prefixes("foo-.service") == []
    assert names.unescape("dev-sda1\\x2dx") == "dev/sda1-x"


def test_dropin_stems_follow_unit_file_find_dirs() -> None:
    """The name, an instance's template, then the dash prefixes (the template's, for an instance);
    only the first two may be links to directories."""
    assert names.dropin_stems("foo-bar.service") == (("foo-bar.service", True), ("foo-.service", False))
    assert names.dropin_stems("a-b@x-y.service") == (
        ("a-b@x-y.service", True),
        ("a-b@.service", True),
        ("a-.service", False),
        ("a-@.service", False),
    )
    assert names.dropin_stems("plain.target") == (("plain.target", True),)


def test_specifiers() -> None:
    unit = "serial-getty@ttyS0.service"
    assert (
        expand("%n %N %p %i %j %%", unit)
        == "serial-getty@ttyS0.service serial-getty@ttyS0 serial-getty ttyS0 getty %"
    )
    assert (
        expand("%I|%f", "systemd-fsck@dev-disk-by\\x2dlabel-root.service")
        == "dev/disk/by-label/root|/dev/disk/by-label/root"
    )
    with pytest.raises(SpecifierError):
        expand("%H", unit)
    with pytest.raises(SpecifierError):
        expand("50%", unit)


def test_preset_lines_systemctl_crashes_on(tmp_path) -> None:
    """A bare ``enable`` line makes systemctl 252 crash (SIGSEGV) in list-unit-files, so it cannot be
    the oracle here: we record the line as a problem and go on with the other rules."""
    from imagelint.facts.systemd import Presets
    from imagelint.targets.rootfs import RootfsTarget

    preset_dir = tmp_path / "usr/lib/systemd/system-preset"
    preset_dir.mkdir(parents=True)
    (preset_dir / "50-x.preset").write_text("enable\ndisable b.service\nenable *\n")
    presets = Presets.load(RootfsTarget(tmp_path))
    assert [(p.path, p.line) for p in presets.problems] == [("/usr/lib/systemd/system-preset/50-x.preset", 1)]
    assert presets.verdict("b.service") == "disabled"
    assert presets.verdict("a.service") == "enabled"
