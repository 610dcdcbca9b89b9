"""What makes a saved plan stale: node capacity and our own jobs, not foreign churn."""

from __future__ import annotations

from datetime import timedelta

import pytest

from specs.observation import Observation, observation_of, observed_digest
from specs.snapshot import (
    ClusterState,
    Job,
    JobState,
    Node,
    PoolState,
    Replica,
    Reservation,
    Snapshot,
)
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


def test_an_observation_read_back_is_the_one_kept() -> None:
    """The store keeps a plan's observation as JSON; read back, it is the same facts with
    the same digest (pools, reservations and a cluster that did not answer included)."""
    window = Reservation(name="maint", start=NOW, end=NOW + timedelta(hours=2))
    node = Node(
        name="a-3", pool="a", gpus=8, reservations=[window, Reservation(name="x", start=NOW)]
    )
    busy = (
        snap(OURS, FOREIGN)
        .clusters[0]
        .model_copy(update={"nodes": [node], "pools": [PoolState(name="a", max_walltime=3600)]})
    )
    down = ClusterState(name="d", reachable=False, error="timeout")
    gone = ClusterState(name="g", gone=True)
    whole = Snapshot(now=NOW, clusters=[busy, down, gone])
    seen = observation_of(whole)
    assert set(seen.clusters) == {"c", "d"}  # a cluster gone from the specs is not counted
    back = Observation.from_json(seen.to_json())
    assert back == seen and back.digest == observed_digest(whole)
    with pytest.raises(ValueError, match="not an observation"):
        Observation.from_json('[["c", [["a-1", 8]], []]]')
