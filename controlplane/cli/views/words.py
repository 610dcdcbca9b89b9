"""Counts in words: "1 cluster", "2 clusters", "1,000 records"; "1 workload waits"."""

from __future__ import annotations


def counted(n: float, noun: str) -> str:
    """``n`` and ``noun``, plural (a plain -s) unless ``n`` is 1; whole numbers with
    thousands separators, others to two decimals."""
    shown = f"{int(n):,}" if float(n).is_integer() else f"{n:,.2f}"
    return f"{shown} {noun if n == 1 else noun + 's'}"


def agrees(n: float, verb: str) -> str:
    """``verb`` in the present tense for ``n`` things: "waits" for one, "wait" for more."""
    return verb + "s" if n == 1 else verb
