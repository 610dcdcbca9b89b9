"""The busy benchmark's harness on a small org: it must time every stage a plan runs
(nothing here is timed against a target; benchmarks/README.md holds the numbers)."""

from __future__ import annotations

from pathlib import Path

from benchmarks import history, storage
from benchmarks.scale import NEW, measure
from benchmarks.stages import STAGES
from controlplane.store import Store


def test_the_busy_benchmark_times_every_stage_of_a_small_plan() -> None:
    size = measure(40, 200, [NEW], cap=30, memory=False)
    run = size.runs[NEW]
    assert run.rounds >= 2  # a busy org reclaims, so the plan runs follow-up rounds
    timed = {stage for stage in STAGES if run.seconds.get(stage, 0.0) > 0.0}
    # CP-SAT is imported only when it first runs: its stage must be timed all the same
    assert timed == set(STAGES), set(STAGES) - timed
    assert run.evictions > 0


def test_the_history_benchmark_reads_the_runs_it_wrote(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'store.db'}", init=True, create_dir=True)
    history.fill(store, days=1, per_day=60)
    seen = history.running_now(5)
    # one usage record per run (a day in mid-November: no month boundary), the seen ones too
    assert len(store.usage_records(history.NOW)) == 60
    assert len(store.usage_records(history.NOW, seen)) == 65
    # the completed runs of a segmented workload are its progress
    workloads = {"p001/w00001", "p003/w00003"}
    [one, three] = store.progress(workloads, now=history.NOW, seen=seen)
    assert (one.workload, one.segments, three.segments) == ("p001/w00001", 1, 1)
    store.close()


def test_the_storage_benchmark_stores_a_loops_cycles(tmp_path: Path) -> None:
    made = storage.busy_plan(40, tmp_path / "org")
    steady = storage.cycles(made, 3, actions=2)
    assert [len(c.actions) for c in steady] == [2, 2, 2] and len({c.id for c in steady}) == 3
    assert all(c.pending == made.pending for c in steady)
    assert steady[1].created_at > steady[0].created_at
