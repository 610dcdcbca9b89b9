"""Knobs of the scheduling policy that are not part of the specs (site-wide defaults), and
the plan's time budget.

The core reads no clock of its own: a :class:`Deadline` is given the caller's clock, and
steps ask it between units of work whether time is up. A plan that finishes within its
limit never depends on the clock, so it is the same on every run; one that does not
says which steps were cut short (``Deadline.cut_short``), and is the best reached. The
steps also tell it where they stand (:meth:`Deadline.at`), for a caller that shows a long
plan's progress; that changes nothing in the plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Policy:
    k: float = 1.0  # time-based fairshare: how strongly past usage bends the over-quota split
    seed: int = 0  # CP-SAT random seed: plans are reproducible
    workers: int = 2
    # seconds for the whole plan (when the caller gives a clock): when they run out, the
    # plan reached so far is returned and says which steps did not finish
    time_limit: float = 60.0
    cpsat_time_limit: float = 5.0  # at most this for the CP-SAT search, within time_limit
    engine: str = "best"  # "best": greedy and CP-SAT, keep the better; "kai": greedy only
    # the victim search: "indexed", or "exhaustive" (as first written: no indexes, every
    # simulation replays the whole waiting queue), kept to compare the two (benchmarks)
    search: str = "indexed"
    # a waiting job whose identical twin (same project, priority, shape, pools) failed
    # earlier in a step is not searched again in that step (KAI's scheduling signatures);
    # True searches it again after every success, as the first implementation did
    retry_twins: bool = False


DEFAULT_POLICY = Policy()


# how a CP-SAT stage stopped by CP-SAT's own limit (Policy.cpsat_time_limit) says so: its
# answer is not proven best, but no step of the plan was left undone
CPSAT_OWN_LIMIT = "CP-SAT's own time limit"


class Deadline:
    """A plan's wall-clock budget, read through the caller's ``clock`` (seconds, monotonic).
    Without a clock there is no limit. ``cut_short`` lists what stopped early, and why."""

    def __init__(
        self,
        seconds: float | None = None,
        clock: Callable[[], float] | None = None,
        progress: Callable[[str], None] | None = None,
    ):
        self.clock = clock
        self.end = clock() + seconds if clock is not None and seconds is not None else None
        self.cut_short: list[str] = []
        self.round = 1  # the reconciler's cycle (controlplane/converge.py), for the record
        self.progress = progress  # told where the plan stands (``at``), if given

    def at(self, step: str) -> None:
        """The plan is at ``step`` of the current round: the caller's ``progress`` hears
        so ("round 2, reclaim: 400 of 1,795 waiting jobs")."""
        if self.progress is not None:
            self.progress(f"round {self.round}, {step}")

    @property
    def expired(self) -> bool:
        return self.end is not None and self.clock is not None and self.clock() >= self.end

    def left(self) -> float:
        """Seconds left (infinite without a limit)."""
        if self.end is None or self.clock is None:
            return math.inf
        return max(0.0, self.end - self.clock())

    def cut(self, step: str, why: str) -> None:
        """Record that ``step`` stopped before it was done, and why."""
        entry = f"{step} (round {self.round}): {why}"
        if entry not in self.cut_short:
            self.cut_short.append(entry)
