"""CONTRIBUTING.md's walk-through works as written: its check kind registers and its rule fires on its
example and stays quiet on its negative example."""

from __future__ import annotations

import re
import sys
import textwrap
import types
from pathlib import Path

from imagelint.checks import registry, unregister
from imagelint.config import Config
from imagelint.engine import RunSettings, audit
from imagelint.report import Outcome
from imagelint.rulepacks import load_packs
from imagelint.targets import RootfsTarget
from tests.support import REPO, build_tree, os_root

GUIDE = (REPO / "CONTRIBUTING.md").read_text()


def _block(language: str, after: str) -> str:
    start = GUIDE.index(after)
    match = re.search(rf"```{language}\n(.*?)```", GUIDE[start:], re.S)
    assert match, f"no {language} block after {after!r}"
    return textwrap.dedent(match.group(1))


def test_the_guide_s_check_kind_and_rule_work(tmp_path: Path, monkeypatch) -> None:
    registry()
    module = types.ModuleType("imagelint.checks.guide_example")  # as a module of the package would be
    monkeypatch.setitem(sys.modules, module.__name__, module)
    guide = _block("python", "## How to add a check kind")
    exec(compile(guide, "CONTRIBUTING.md", "exec", dont_inherit=True), module.__dict__)
    try:
        assert "file.hostname_set" in registry()
        pack = tmp_path / "guide.yaml"
        pack.write_text("rules:\n" + _block("yaml", "## How to add a rule"))
        [loaded] = load_packs([pack])
        [rule] = loaded.rules
        for tree, expected in ((rule.example, Outcome.FAIL), (rule.negative_example, Outcome.PASS)):
            root = build_tree(tmp_path / expected.value, tree or {})
            report = audit(RootfsTarget(root), [loaded], Config(), RunSettings())
            assert [r.outcome for r in report.rules] == [expected]
    finally:
        unregister("file.hostname_set")


def test_a_new_format_is_one_module_and_every_command_takes_it(tmp_path: Path, monkeypatch) -> None:
    """'How to add an output format': one module in the formats package and its line in FORMATS."""
    import imagelint.formats
    import imagelint.session
    from imagelint.commands.units import listing_of
    from imagelint.formats.interface import REPORT, UNITS
    from imagelint.formats.outputs import OutputSpec, write_outputs

    package = tmp_path / "formats"
    package.mkdir()
    (package / "tally.py").write_text(
        textwrap.dedent(
            """
            from imagelint.formats.interface import REPORT, UNITS


            class Tally:
                name = "tally"
                documents = (REPORT, UNITS)

                def render(self, report, options):
                    return f"{len(report.findings)} finding(s)\\n"

                def render_units(self, listing, options):
                    return f"{len(listing.index.units)} unit(s)\\n"


            FORMATTER = Tally()
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(imagelint.formats.FORMATS, "tally", "formats.tally")
    root = os_root(tmp_path / "image", {"/etc/systemd/system/a.service": "[Service]\nExecStart=/bin/true\n"})
    report = audit(RootfsTarget(root), [], Config(), RunSettings())
    out = tmp_path / "out"
    write_outputs(report, [OutputSpec.parse(f"tally:{out}.report")], imagelint.formats.RenderOptions())
    listing = listing_of(str(root))
    write_outputs(
        listing, [OutputSpec.parse(f"tally:{out}.units", UNITS)], imagelint.formats.RenderOptions(), UNITS
    )
    assert (Path(f"{out}.report").read_text(), Path(f"{out}.units").read_text()) == (
        "0 finding(s)\n",
        "1 unit(s)\n",
    )
    assert REPORT == "report"


def test_a_new_target_is_one_opener_module_and_every_command_takes_it(tmp_path: Path, monkeypatch) -> None:
    """'How to add a target': one module in the openers package and its line in OPENER_MODULES; audit,
    units and both sides of diff take the new kind at once, nothing else edited."""
    import imagelint.openers
    from imagelint.commands.diff import run_diff
    from imagelint.commands.units import run_units
    from imagelint.formats.outputs import OutputSpec
    from imagelint.report import Verdict
    from imagelint.session import RunOptions, run_audit

    package = tmp_path / "openers"
    package.mkdir()
    (package / "mirror.py").write_text(
        textwrap.dedent(
            """
            import contextlib

            from imagelint.openers import Opened
            from imagelint.targets import RootfsTarget

            PREFIX = "mirror:"


            class MirrorOpener:
                kind = "mirror"
                order = 20

                def claims(self, spec, options):
                    return spec.startswith(PREFIX)

                @contextlib.contextmanager
                def open(self, spec, options):
                    yield Opened(self.kind, RootfsTarget(spec.removeprefix(PREFIX)))


            OPENER = MirrorOpener()
            """
        )
    )
    monkeypatch.setattr(imagelint.openers, "__path__", [*imagelint.openers.__path__, str(package)])
    monkeypatch.setattr(imagelint.openers, "OPENER_MODULES", (*imagelint.openers.OPENER_MODULES, "mirror"))
    monkeypatch.setattr(imagelint.openers, "_OPENERS", [])  # found again, with the new module
    monkeypatch.setitem(sys.modules, "imagelint.openers.mirror", None)  # removed again afterwards
    del sys.modules["imagelint.openers.mirror"]
    assert "mirror" in [o.kind for o in imagelint.openers.openers()]

    root = os_root(tmp_path / "image", {"/etc/systemd/system/a.service": "[Service]\nExecStart=/bin/true\n"})
    out = tmp_path / "out"
    options = RunOptions(builtin=False, outputs=[OutputSpec.parse(f"json:{out}.report")])
    assert run_audit(f"mirror:{root}", options) is Verdict.PASS
    assert run_units(f"mirror:{root}", [f"json:{out}.units"]) == 0
    assert '"a.service"' in Path(f"{out}.units").read_text()
    result = run_diff(Path(f"mirror:{root}"), root, None, [], builtin=False)
    assert (result.verdict, result.changes) == (Verdict.PASS, [])
