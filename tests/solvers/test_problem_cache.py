"""The spec part of a problem, cached by the specs' digest (solvers/problem.py ProblemCache):
problems built with it are the problems built without it, and one problem's changes to
its jobs never reach the next."""

from __future__ import annotations

from dataclasses import asdict

from solvers.problem import ProblemCache, build_problem
from specs.snapshot import Snapshot
from tests.builders import NOW, cluster, desired, project, workload


def _specs(digest: str, gpus: int = 2):  # type: ignore[no-untyped-def]
    return desired(
        [
            cluster(),
            project("chem", gpus=8),
            workload("a", "chem", gpus=gpus),
            workload("b", "chem", gpus=1, replicas=2, minReplicas=1),
        ],
        digest=digest,
    )


def test_a_cached_problem_is_the_problem_built_afresh() -> None:
    cache, specs, snap = ProblemCache(), _specs("one"), Snapshot(now=NOW)
    fresh = build_problem(specs, snap, NOW)
    first = build_problem(specs, snap, NOW, cache)
    second = build_problem(specs, snap, NOW, cache)
    assert {k: asdict(j) for k, j in first.jobs.items()} == {
        k: asdict(j) for k, j in fresh.jobs.items()
    }
    assert second.queues is first.queues  # the spec part was built once
    first.jobs["chem/a"].placed.append("sim/a100-01")
    first.jobs["chem/a"].blocked = None
    first.jobs["chem/b"].job_id = "7"
    assert asdict(build_problem(specs, snap, NOW, cache).jobs["chem/a"]) == asdict(
        fresh.jobs["chem/a"]
    )
    assert build_problem(specs, snap, NOW, cache).jobs["chem/b"].job_id is None


def test_other_specs_are_another_entry() -> None:
    cache, snap = ProblemCache(), Snapshot(now=NOW)
    assert build_problem(_specs("one"), snap, NOW, cache).jobs["chem/a"].gpus == 2
    assert build_problem(_specs("two", gpus=4), snap, NOW, cache).jobs["chem/a"].gpus == 4


def test_a_changed_workload_is_built_again_and_the_others_are_reused() -> None:
    cache, snap = ProblemCache(), Snapshot(now=NOW)
    first = build_problem(_specs("one"), snap, NOW, cache)
    part = cache.spec_part(_specs("two", gpus=4))  # chem/a changed, chem/b did not
    assert part.queues is first.queues
    assert part.requests["chem/a"].gpus == 4
    assert part.requests["chem/b"] is cache.spec_part(_specs("one")).requests["chem/b"]
    again = build_problem(_specs("two", gpus=4), snap, NOW)
    assert {
        k: asdict(j) for k, j in build_problem(_specs("two", gpus=4), snap, NOW, cache).jobs.items()
    } == {k: asdict(j) for k, j in again.jobs.items()}
