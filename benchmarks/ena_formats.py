"""How many of the ENA driver's reset-class formats since 2024 a revision's patterns recognise.

The formats are the test data of ``tests/facts/journal/ena_formats.py`` (amzn-drivers 2.11.0-2.17.0,
each format string filled and printed as the kernel logs it). For the working tree and for a named
baseline revision (its ``imagelint/facts/journal/patterns.py``, read with ``git show``), prints: the
formats recognised as any reset-path wording (N of M), those recognised as the expected wording, those
that alone count as a reset (a reset line, or a line printed where the driver decides the reset:
``EnaMessage.decides``, issue 49), and the healthy driver lines (plus the kernel-formats test's benign
ones) taken for reset-path lines.

Run: .venv/bin/python benchmarks/ena_formats.py [--baseline REV]
The test suite checks every format in real journals (``tests/facts/journal/test_kernel_formats.py``).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's imagelint

from tests.facts.journal.ena_formats import HEALTHY, RESET_CLASS  # noqa: E402
from tests.facts.journal.test_kernel_formats import BENIGN  # noqa: E402

PATTERNS = "imagelint/facts/journal/patterns.py"


def _patterns_at(rev: str) -> ModuleType:
    """The patterns module as it is at ``rev`` (it imports only ``imagelint.textmatch``)."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:{PATTERNS}"], check=True, capture_output=True
    ).stdout
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "patterns_baseline.py"
        path.write_bytes(source)
        spec = importlib.util.spec_from_file_location("patterns_baseline", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    return module


def _measure(label: str, patterns: ModuleType) -> None:
    def message(text: str) -> object | None:
        return next((m for m in patterns.ENA_RESET_PATH if m.regex.search(text)), None)

    def wording(text: str) -> str | None:
        found = message(text)
        return getattr(found, "name", None)

    reset_roles = {patterns.RESET_DECIDED, patterns.RESET_STARTED, patterns.RESET_DONE, patterns.RESET_FAILED}

    def a_reset_alone(text: str) -> bool:
        found = message(text)
        return found is not None and (
            getattr(found, "decides", False) or getattr(found, "role", "") in reset_roles
        )

    found = [wording(f.line()) for f in RESET_CLASS]
    healthy = [f.line() for f in HEALTHY] + BENIGN
    false = [text for text in healthy if wording(text) is not None]
    right = sum(name == f.wording for name, f in zip(found, RESET_CLASS, strict=True))
    missed = [f"{f.fmt} ({f.source})" for name, f in zip(found, RESET_CLASS, strict=True) if name is None]
    alone = sum(a_reset_alone(f.line()) for f in RESET_CLASS)
    print(
        f"{label}: recognised {sum(n is not None for n in found)} of {len(RESET_CLASS)} reset-class formats"
        f" ({right} as the expected wording; {alone} a reset on their own); false alarms {len(false)} of"
        f" {len(healthy)} healthy lines"
    )
    for text in missed:
        print(f"  unrecognised: {text}")
    for text in false:
        print(f"  false alarm: {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="HEAD", help="git revision to compare with (default HEAD)")
    args = parser.parse_args()
    _measure(f"baseline {args.baseline}", _patterns_at(args.baseline))
    from imagelint.facts.journal import patterns

    _measure("working tree", patterns)


if __name__ == "__main__":
    main()
