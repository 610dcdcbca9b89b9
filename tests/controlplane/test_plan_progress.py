"""A long plan tells where it stands: each round's steps, and how far a disruptive step has
got through its waiting jobs. Telling changes nothing in the plan."""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks.busy import busy_org, write_org
from controlplane.reconcile import plan
from controlplane.statefiles import read_snapshot
from solvers.kai.disruption import PROGRESS_EVERY
from specs.loader import load_specs


def test_a_plan_tells_its_rounds_and_steps_and_is_the_same_plan() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        specs, observed = write_org(busy_org(60, 400), Path(tmp))
        desired, snap = load_specs(specs).desired, read_snapshot(observed)
        notes: list[str] = []
        told = plan(desired, snap, now=snap.now, progress=notes.append)
        assert told == plan(desired, snap, now=snap.now)
    first = [n for n in notes if n.startswith("round 1, ") and ":" not in n]
    assert first == [
        "round 1, reading the problem",
        "round 1, allocating",
        "round 1, consolidation",
        "round 1, reclaim",
        "round 1, preemption",
        "round 1, allocating what is left",
    ]
    # a disruptive step with more waiting jobs than PROGRESS_EVERY says how far it got
    counted = [n for n in notes if n.startswith("round 1, reclaim: ")]
    assert counted and counted[0].startswith(f"round 1, reclaim: {PROGRESS_EVERY:,} of ")
    assert "round 2, reading the problem" in notes  # the busy org needs follow-up rounds
