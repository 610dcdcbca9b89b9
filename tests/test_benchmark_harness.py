"""The busy benchmark's harness on a small org: it must time every stage a plan runs
(nothing here is timed against a target; benchmarks/README.md holds the numbers)."""

from __future__ import annotations

from benchmarks.scale import NEW, measure
from benchmarks.stages import STAGES


def test_the_busy_benchmark_times_every_stage_of_a_small_plan() -> None:
    size = measure(40, 200, [NEW], cap=30, memory=False)
    run = size.runs[NEW]
    assert run.rounds >= 2  # a busy org reclaims, so the plan runs follow-up rounds
    timed = {stage for stage in STAGES if run.seconds.get(stage, 0.0) > 0.0}
    # CP-SAT is imported only when it first runs: its stage must be timed all the same
    assert timed == set(STAGES), set(STAGES) - timed
    assert run.evictions > 0
