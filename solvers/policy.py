"""Knobs of the scheduling policy that are not part of the specs (site-wide defaults)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Policy:
    k: float = 1.0  # time-based fairshare: how strongly past usage bends the over-quota split
    seed: int = 0  # CP-SAT random seed: plans are reproducible
    workers: int = 2
    time_limit: float = 5.0  # seconds for the CP-SAT search; the best answer so far is kept
    engine: str = "best"  # "best": greedy and CP-SAT, keep the better; "kai": greedy only
