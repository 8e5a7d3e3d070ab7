"""What every long fuzzing run prints at the end: its crash signatures, each with a count and one example."""

from __future__ import annotations

from collections import Counter


def print_crashes(crashes: Counter[str], example: dict[str, str]) -> None:
    print(f"unique crash signatures: {len(crashes)}")
    for sig, n in crashes.most_common():
        print(f"  {n:7d}  {sig}")
        print(f"           e.g. {example[sig]}")
