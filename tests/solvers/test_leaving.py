"""Which work must leave the nodes a simulated cluster's spec removes or shrinks
(solvers/leaving.py): everything on a removed node; on a shrunk one, what is not ours stays,
then our jobs in the order they started while they fit."""

from __future__ import annotations

from datetime import timedelta

from solvers.leaving import must_leave
from specs.snapshot import ClusterState, Job, JobState, Node, Replica
from tests.builders import NOW


def job(id: str, node: str, gpus: int, minutes: int | None, workload: str | None = "p/w") -> Job:
    started = NOW + timedelta(minutes=minutes) if minutes is not None else None
    state = JobState.RUNNING if started is not None else JobState.PENDING
    return Job(
        id=id,
        workload=workload,
        state=state,
        started_at=started,
        replicas=[Replica(node=node, gpus=gpus)],
    )


def test_on_a_shrunk_node_the_first_started_stay_while_they_fit() -> None:
    state = ClusterState(
        name="c",
        nodes=[Node(name="n1", gpus=8, pool="a100")],
        jobs=[
            job("late", "n1", 2, minutes=30),
            job("early", "n1", 2, minutes=0),
            job("theirs", "n1", 2, minutes=45, workload=None),  # not ours: it stays
            job("middle", "n1", 2, minutes=10),
        ],
        shrinking_nodes={"n1": 6},
    )
    leaving = must_leave(state)
    assert sorted(leaving) == ["late"], leaving
    assert "its node n1 shrinks to 6 GPUs" in leaving["late"][0][1]


def test_everything_of_ours_leaves_a_removed_node() -> None:
    state = ClusterState(
        name="c",
        nodes=[Node(name="n1", gpus=8, pool="a100", state="drain")],
        jobs=[job("a", "n1", 2, minutes=0), job("theirs", "n1", 2, 0, workload=None)],
        removed_nodes=["n1"],
    )
    assert {k: [n for n, _ in v] for k, v in must_leave(state).items()} == {"a": ["n1"]}


def test_nothing_leaves_a_node_whose_work_fits_its_new_size() -> None:
    state = ClusterState(
        name="c",
        nodes=[Node(name="n1", gpus=8, pool="a100", state="drain")],
        jobs=[job("a", "n1", 4, minutes=0), job("queued", "n1", 4, minutes=None)],
        shrinking_nodes={"n1": 4},  # the queued job holds no GPUs
    )
    assert must_leave(state) == {}


def test_work_winding_down_on_a_shrunk_node_makes_room_instead_of_staying() -> None:
    """A job that started first but is winding down (a cancel or eviction under way) ends
    within its grace: it neither keeps its place nor moves, and the newer job that fits
    once it has ended stays."""
    ending = job("ending", "n1", 4, minutes=0)
    ending.state = JobState.COMPLETING
    state = ClusterState(
        name="c",
        nodes=[Node(name="n1", gpus=8, pool="a100")],
        jobs=[ending, job("newer", "n1", 4, minutes=20)],
        shrinking_nodes={"n1": 4},
    )
    assert must_leave(state) == {}
