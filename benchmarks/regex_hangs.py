"""Every regex of the built-in packs, and catastrophic custom ones, against adversarial text.

Inputs: long runs of blank lines and of whitespace, runs of the characters a pattern's prefix wants
(``ECS_CLUSTER=`` repeated, ``aws_`` repeated, hex digits, ``root:``, ``"flows"``...), very long lines,
and 16 MiB files (the target's read limit). Patterns: the ``pattern`` of every built-in rule (with its
flags, exactly as ``imagelint.checks.files`` compiles it), every journal pattern in
``imagelint.facts.journal.patterns``, and ``(a+)+$``-style custom patterns: RE2 runs those in linear
time; the ones RE2 cannot run (a backreference) go to Python's ``re`` in the worker and must end in
``RegexBudgetError`` within their budget, never hang.

For each case the time is compared with a plain linear scan of the same data (``bytes.count(b"\\n")``),
measured in the same run. Prints the slowest case, its time and that ratio.

Run: .venv/bin/python benchmarks/regex_hangs.py [--size-mib 16] [--budget 2]
The test suite runs a small sample (``tests/textmatch/test_regex_budget.py``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's imagelint

CUSTOM = [
    (r"(a+)+$", False),
    (r"^(\s*)*x", False),
    (r"(a|aa)+b", False),
    (r"(.*a){12}", False),
    (r"(a+)+\1$", False),  # a backreference: Python's re in the worker, under the budget
    (r"^(\w+\s?)*$", True),
]


@dataclass(frozen=True)
class Outcome:
    pattern: str
    text: str  # which adversarial input
    size: int  # bytes
    seconds: float
    scan_seconds: float  # bytes.count(b"\n") over the same data
    result: str  # "match", "no match" or "budget error"
    engine: str

    @property
    def ratio(self) -> float:
        return self.seconds / max(self.scan_seconds, 1e-6)


def builtin_patterns() -> list[tuple[str, bool, bool, str]]:
    """(pattern, multiline, ignore_case, source) of every built-in rule and journal pattern."""
    from imagelint.facts.journal.patterns import SIGNALS, TEXT_PATTERNS
    from imagelint.rulepacks import builtin_pack_paths, load_packs

    found: list[tuple[str, bool, bool, str]] = []

    def walk(rule_id: str, spec: object) -> None:
        params = getattr(spec, "params", {})
        if "pattern" in params:
            multiline = getattr(spec, "kind", "").startswith("file.")
            found.append((params["pattern"], multiline, bool(params.get("ignore_case")), rule_id))
        for condition in (*getattr(spec, "when", ()), *getattr(spec, "unless", ())):
            walk(rule_id, condition)

    for pack in load_packs([], builtin=builtin_pack_paths()):
        for rule in pack.rules:
            walk(rule.id, rule.check)
    for text in TEXT_PATTERNS:
        found.append(
            (text.regex.pattern, text.regex.multiline, text.regex.ignore_case, f"journal {text.key}")
        )
    for signal in SIGNALS.values():
        if signal.message:
            found.append((signal.message, False, False, f"signal {signal.name}"))
    return found


def adversarial_texts(size: int) -> Iterator[tuple[str, str]]:
    """(name, text) of about ``size`` bytes each."""

    def fill(unit: str, tail: str = "!") -> str:
        return unit * max(1, (size - len(tail)) // len(unit)) + tail

    yield "blank lines", fill("\n")
    yield "spaces and tabs, one line", fill(" \t")
    yield "whitespace of every kind", fill(" \t\r\f\v\n\x85\u2028\xa0")
    yield "indented blank lines", fill("   \t \n")
    yield "one very long line of a", fill("a")
    yield "a runs ending in !", fill("a" * 30 + "!\n")
    yield "ECS_CLUSTER= repeated", fill("ECS_CLUSTER=")
    yield "aws_ prefixes", fill(" aws_secret_access_key aws_session_token ")
    yield "hex digits", fill("0123456789abcdef")
    yield "root: prefixes", fill("root:")
    yield '"flows" prefixes', fill('"flows"  :  [  ')
    yield "ena and Start request", fill("ena ena Start request repeated too quickly ")
    yield "words and spaces", fill("word ")


def linear_scan(data: bytes) -> float:
    started = time.perf_counter()
    data.count(b"\n")
    return time.perf_counter() - started


def run_case(
    pattern: str, multiline: bool, ignore_case: bool, name: str, text: str, budget: float
) -> Outcome:
    from imagelint import textmatch

    compiled = textmatch.compile(pattern, multiline=multiline, ignore_case=ignore_case, budget=budget)
    data = text.encode("utf-8", "surrogateescape")
    scan = min(linear_scan(data) for _ in range(3))
    started = time.perf_counter()
    try:
        found = (
            compiled.match_lines(text, where=name, limit=1)
            if multiline
            else compiled.search(text, where=name)
        )
        result = "match" if found else "no match"
    except textmatch.RegexBudgetError:
        result = "budget error"
    engine = "python" if compiled.worker_calls else "re2"  # where this text was matched
    return Outcome(pattern, name, len(data), time.perf_counter() - started, scan, result, engine)


def run(size: int, budget: float, custom: bool = True) -> list[Outcome]:
    patterns = [(p, m, i) for p, m, i, _ in builtin_patterns()]
    if custom:
        patterns += [(p, True, i) for p, i in CUSTOM]
    texts = list(adversarial_texts(size))
    return [run_case(p, m, i, name, text, budget) for p, m, i in patterns for name, text in texts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=float, default=16.0, help="size of each adversarial text")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds for patterns RE2 cannot run")
    args = parser.parse_args()
    size = int(args.size_mib * 1024 * 1024)
    started = time.monotonic()
    outcomes = run(size, args.budget)
    patterns = len({o.pattern for o in outcomes})
    print(f"{len(outcomes)} cases ({patterns} patterns), {size} bytes each")
    for engine in ("re2", "python"):
        mine = [o for o in outcomes if o.engine == engine]
        if not mine:
            continue
        slowest = max(mine, key=lambda o: o.seconds)
        print(
            f"slowest on {engine}: {slowest.seconds:.3f} s, {slowest.ratio:.0f}x a linear scan "
            f"({slowest.scan_seconds * 1000:.1f} ms): {slowest.pattern!r} on {slowest.text}"
            f" -> {slowest.result}"
        )
    builtin = [o for o in outcomes if o.pattern not in {p for p, _ in CUSTOM}]
    slowest = max(builtin, key=lambda o: o.seconds)
    print(
        f"slowest built-in: {slowest.seconds:.3f} s, {slowest.ratio:.0f}x a linear scan: "
        f"{slowest.pattern!r} on {slowest.text}"
    )
    errors = [o for o in outcomes if o.result == "budget error"]
    failing = sorted({o.pattern for o in errors})
    print(f"budget errors (never a hang, never a pass): {len(errors)}, from {failing}")
    print(f"elapsed: {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
