"""What makes a saved plan stale: node capacity and our own jobs, not foreign churn."""

from __future__ import annotations

from specs.snapshot import ClusterState, Job, JobState, Node, Replica, Snapshot, observed_digest
from tests.builders import NOW


def snap(*jobs: Job, state: str = "idle", gpus: int = 8) -> Snapshot:
    nodes = [Node(name="a-1", pool="a", gpus=gpus, state=state), Node(name="a-2", pool="a", gpus=8)]  # type: ignore[arg-type]
    return Snapshot(now=NOW, clusters=[ClusterState(name="c", nodes=nodes, jobs=list(jobs))])


OURS = Job(id="1", workload="p/w", state=JobState.RUNNING, replicas=[Replica(node="a-1", gpus=4)])
FOREIGN = Job(id="2", workload=None, state=JobState.RUNNING, replicas=[Replica(node="a-2", gpus=2)])


def test_foreign_jobs_and_busy_states_do_not_make_a_plan_stale() -> None:
    base = observed_digest(snap(OURS))
    assert observed_digest(snap(OURS, FOREIGN)) == base
    assert observed_digest(snap(OURS, state="mixed")) == base


def test_our_jobs_and_node_capacity_do() -> None:
    base = observed_digest(snap(OURS))
    moved = OURS.model_copy(update={"replicas": [Replica(node="a-2", gpus=4)]})
    assert observed_digest(snap(moved)) != base
    assert observed_digest(snap()) != base
    assert observed_digest(snap(OURS, gpus=4)) != base
    assert observed_digest(snap(OURS, state="drain")) != base
