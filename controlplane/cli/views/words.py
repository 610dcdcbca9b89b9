"""Counts in words: "1 cluster", "2 clusters", "1,000 records"; "1 workload waits";
"3 over-quota, 1 over-limit"."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


def counted(n: float, noun: str) -> str:
    """``n`` and ``noun``, plural (a plain -s) unless ``n`` is 1; whole numbers with
    thousands separators, others to two decimals."""
    shown = f"{int(n):,}" if float(n).is_integer() else f"{n:,.2f}"
    return f"{shown} {noun if n == 1 else noun + 's'}"


def agrees(n: float, verb: str) -> str:
    """``verb`` in the present tense for ``n`` things: "waits" for one, "wait" for more."""
    return verb + "s" if n == 1 else verb


def tally(kinds: Iterable[str]) -> str:
    """How many of each kind, most first (then by name): "3 over-quota, 1 over-limit"."""
    counts = Counter(kinds)
    return ", ".join(
        f"{n:,} {kind}" for kind, n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))
    )
