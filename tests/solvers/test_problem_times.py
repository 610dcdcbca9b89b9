"""Times in a problem are on one shared UTC clock: the same instants as the snapshot's,
whatever offset each was written with, so job order compares them natively."""

from __future__ import annotations

from datetime import UTC

from solvers.order import job_order
from solvers.problem import build_problem
from specs.snapshot import Snapshot
from tests.builders import NOW, cluster, desired, project, workload


def test_queue_times_keep_their_instants_on_one_clock() -> None:
    specs = desired(
        [
            cluster(),
            project("chem", gpus=8),
            workload("late", "chem", gpus=1),
            workload("early", "chem", gpus=1),
        ]
    )
    # read as cp reads a snapshot file: each time gets its own time zone object
    snap = Snapshot.model_validate_json(
        '{"now": "2026-11-23T12:00:00Z", "queue": ['
        '{"workload": "chem/late", "since": "2026-11-23T10:30:00Z"},'
        '{"workload": "chem/early", "since": "2026-11-23T11:00:00+02:00"}]}'
    )
    problem = build_problem(specs, snap, NOW)
    late, early = problem.jobs["chem/late"], problem.jobs["chem/early"]
    assert late.created.tzinfo is UTC and early.created.tzinfo is UTC
    assert early.created == snap.queue[1].since  # 09:00 UTC: the same instant
    assert job_order(early) < job_order(late)  # older first, across offsets
