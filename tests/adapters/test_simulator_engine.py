"""The simulator engine carries out a plan's actions in one run (``execute_many``, what the
reconciler's virtual world uses) exactly as it does one action at a time."""

from __future__ import annotations

from datetime import timedelta

import pytest

from adapters.base import PermanentError
from adapters.simulator import SimulatedCluster
from specs.actions import Action, Op, Reason, ReasonCode, SubmitDetails
from specs.snapshot import ClusterState, Job, JobState, Node, Replica
from tests.builders import NOW

WHY = Reason(code=ReasonCode.RECLAIM, message="x")


def _state() -> ClusterState:
    nodes = [Node(name=f"n{i}", pool="p", gpus=4) for i in range(3)]
    jobs = [
        Job(id="1", workload="a/one", pool="p", replicas=[Replica(node="n0", gpus=4)]),
        Job(id="2", workload="a/two", pool="p", replicas=[Replica(node="n1", gpus=2)]),
        Job(id="3", workload=None, pool="p", replicas=[Replica(node="n2", gpus=1)]),
    ]
    return ClusterState(name="c", nodes=nodes, jobs=jobs)


def _actions() -> list[Action]:
    submit = SubmitDetails(gpus_per_replica=2, gpu_type="t")
    return [
        Action(op=Op.PREEMPT, workload="a/one", cluster="c", job="1", reason=WHY),
        Action(
            op=Op.MOVE,
            workload="a/two",
            cluster="c",
            job="2",
            replicas=[Replica(node="n0", gpus=2)],
            reason=WHY,
        ),
        Action(
            op=Op.SUBMIT,
            workload="b/new",
            cluster="c",
            pool="p",
            replicas=[Replica(node="n1", gpus=2), Replica(node=None, gpus=2)],
            submit=submit,
            reason=WHY,
        ),
        Action(op=Op.CANCEL, workload="a/gone", cluster="c", job="99", reason=WHY),
    ]


def test_a_run_of_actions_ends_where_one_at_a_time_ends() -> None:
    one, many = SimulatedCluster(_state()), SimulatedCluster(_state())
    singles = [one.execute(a, plan_id="p", now=NOW) for a in _actions()]
    assert many.execute_many(_actions(), plan_id="p", now=NOW) == singles
    assert many.state == one.state
    assert [j.id for j in many.state.jobs] == ["2", "3", "4"]
    assert [r.node for r in many.state.jobs[2].replicas] == ["n1", "n0"]


def test_a_run_stops_at_the_first_action_that_does_not_fit_and_keeps_the_ones_before() -> None:
    sim = SimulatedCluster(_state())
    too_big = Action(
        op=Op.MOVE,
        workload="a/two",
        cluster="c",
        job="2",
        replicas=[Replica(node="n2", gpus=4)],
        reason=WHY,
    )
    with pytest.raises(PermanentError, match="n2 has 4 GPUs; this would use 5"):
        sim.execute_many([_actions()[0], too_big], plan_id="p", now=NOW)
    assert [j.id for j in sim.state.jobs] == ["2", "3"]  # the preemption stands


def test_a_job_moved_to_another_pool_runs_as_that_pool_s_type() -> None:
    """A move onto a node of another pool kept the job's old pool and GPU type, so its
    GPU-hours there were billed as the old type (user trial: A100 hours counted as V100)."""
    nodes = [
        Node(name="v1", pool="v100", gpu_type="v100", gpus=4, partition="gpu-v100"),
        Node(name="a1", pool="a100", gpu_type="a100_80", gpus=8, partition="gpu-a100"),
    ]
    job = Job(
        id="1",
        workload="p/w",
        pool="v100",
        gpu_type="v100",
        partition="gpu-v100",
        started_at=NOW,
        replicas=[Replica(node="v1", gpus=2)],
    )
    sim = SimulatedCluster(ClusterState(name="c", nodes=nodes, jobs=[job]))
    move = Action(
        op=Op.MOVE,
        workload="p/w",
        cluster="c",
        pool="a100",
        job="1",
        replicas=[Replica(node="a1", gpus=2)],
        reason=WHY,
    )
    later = NOW + timedelta(hours=1)
    sim.execute(move, plan_id="p", now=later)
    [moved] = sim.state.jobs
    assert (moved.pool, moved.gpu_type, moved.partition) == ("a100", "a100_80", "gpu-a100")
    runs = sim.runs(NOW, later + timedelta(hours=1))
    assert [(r.gpu_type, r.ended_at) for r in runs] == [("v100", later), ("a100_80", None)]


def test_a_moved_job_restarts_and_a_resized_one_runs_on() -> None:
    """A move restarts the job on its new nodes (a new Slurm job; new pods on Kubernetes):
    its walltime and its minRuntime count from the move. The simulator kept its first start,
    so a job moved 2 h into its 10 h completed 8 h after the move (user trial). A resize
    grows or shrinks it in place: it runs on from its start."""
    nodes = [Node(name=f"n{i}", pool="p", gpus=4) for i in range(2)]
    started, later = NOW - timedelta(hours=2), NOW
    jobs = [
        Job(
            id="1",
            workload="p/moved",
            pool="p",
            started_at=started,
            walltime=36000,
            replicas=[Replica(node="n0", gpus=2)],
        ),
        Job(
            id="2",
            workload="p/grown",
            pool="p",
            started_at=started,
            walltime=36000,
            replicas=[Replica(node="n0", gpus=1)],
        ),
    ]
    sim = SimulatedCluster(ClusterState(name="c", nodes=nodes, jobs=jobs))
    move = Action(
        op=Op.MOVE,
        workload="p/moved",
        cluster="c",
        job="1",
        replicas=[Replica(node="n1", gpus=2)],
        reason=WHY,
    )
    grow = Action(
        op=Op.RESIZE,
        workload="p/grown",
        cluster="c",
        job="2",
        replicas=[Replica(node="n0", gpus=1), Replica(node="n0", gpus=1)],
        reason=WHY,
    )
    sim.execute_many([move, grow], plan_id="p", now=later)
    moved, grown = sim.state.jobs
    assert (moved.started_at, grown.started_at) == (later, started)
    sim.refresh(later + timedelta(hours=9))  # the grown job's 10 h are up, the moved one's not
    assert [j.state.value for j in sim.state.jobs] == ["RUNNING", "COMPLETED"]


def test_a_job_is_touched_only_for_the_workload_its_tag_names() -> None:
    """As the Slurm and Kubernetes adapters check: an action on job 1 (a/one) for another
    workload is refused, unless it carries job 1's tag because the project was renamed
    (spec.renamedFrom, specs/renames.py)."""
    sim = SimulatedCluster(_state())
    other = Action(op=Op.CANCEL, workload="z/one", cluster="c", job="1", reason=WHY)
    with pytest.raises(PermanentError, match="belongs to workload a/one, not z/one"):
        sim.execute(other, plan_id="p", now=NOW)
    assert [j.id for j in sim.state.jobs] == ["1", "2", "3"]
    renamed = other.model_copy(update={"tagged_as": "a/one"})
    assert sim.execute(renamed, plan_id="p", now=NOW).ok
    assert [j.id for j in sim.state.jobs] == ["2", "3"]


def _trading_places() -> tuple[ClusterState, list[Action]]:
    """Two jobs moved each onto the node the other leaves: neither fits before the other
    has gone."""
    nodes = [Node(name="a", pool="p", gpus=8), Node(name="b", pool="p", gpus=4)]
    jobs = [
        Job(id="1", workload="t/x", pool="p", started_at=NOW, replicas=[Replica(node="a", gpus=4)]),
        Job(id="2", workload="t/y", pool="p", started_at=NOW, replicas=[Replica(node="b", gpus=4)]),
        Job(id="3", workload=None, pool="p", started_at=NOW, replicas=[Replica(node="a", gpus=2)]),
    ]
    moves = [
        Action(op=Op.MOVE, workload=w, cluster="c", job=j, replicas=[Replica(node=n, gpus=4)],
               reason=WHY)
        for w, j, n in (("t/x", "1", "b"), ("t/y", "2", "a"))
    ]  # fmt: skip
    return ClusterState(name="c", nodes=nodes, jobs=jobs), moves


@pytest.mark.parametrize("one_at_a_time", [True, False])
@pytest.mark.parametrize("reverse", [False, True])
def test_moves_that_trade_places_both_run(one_at_a_time: bool, reverse: bool) -> None:
    """A plan's moves may form a cycle (a preempted job placed again where a consolidated
    one left, and that one onto the first's old node: found by the lifetime property
    test). Slurm and Kubernetes carry such moves out (the new job waits for its nodes
    while the old one ends); the simulator refused the first one ("node a has 8 GPUs;
    this would use 10"), so the apply failed and the plan was cut short. A move whose
    nodes are not free yet stops where it ran and starts once they are."""
    state, moves = _trading_places()
    sim = SimulatedCluster(state)
    later = NOW + timedelta(minutes=5)
    order = moves[::-1] if reverse else moves
    if one_at_a_time:
        first = sim.execute(order[0], plan_id="p", now=later)
        assert "waits for room" in first.message
        sim.execute(order[1], plan_id="p", now=later)
    else:
        sim.execute_many(order, plan_id="p", now=later)
    where = {j.id: (j.state, [r.node for r in j.replicas]) for j in sim.state.jobs}
    assert where == {
        "1": (JobState.RUNNING, ["b"]),
        "2": (JobState.RUNNING, ["a"]),
        "3": (JobState.RUNNING, ["a"]),
    }
    assert all(j.started_at == later for j in sim.state.jobs if j.workload)
    assert sim.used() == {"a": 6, "b": 4}


def test_a_move_that_never_finds_room_waits_or_is_refused_in_a_run() -> None:
    """One at a time (an apply) it waits, as a pinned Slurm job would, and the next plan
    sees it waiting; a whole plan run at once (the reconciler's virtual world) refuses it,
    so the plan says a step was refused."""
    state, moves = _trading_places()
    stuck = moves[0].model_copy(update={"replicas": [Replica(node="a", gpus=4)]})
    stuck = stuck.model_copy(update={"job": "2", "workload": "t/y"})
    sim = SimulatedCluster(state)
    assert "waits for room" in sim.execute(stuck, plan_id="p", now=NOW).message
    assert next(j for j in sim.state.jobs if j.id == "2").state is JobState.PENDING
    state, _ = _trading_places()
    with pytest.raises(PermanentError, match="a has 8 GPUs; this would use 10"):
        SimulatedCluster(state).execute_many([stuck], plan_id="p", now=NOW)


def test_a_moved_job_waiting_for_a_node_that_drains_meanwhile_does_not_start_there() -> None:
    state, moves = _trading_places()
    stuck = moves[0].model_copy(update={"replicas": [Replica(node="a", gpus=4)], "job": "2"})
    sim = SimulatedCluster(state)
    sim.execute(stuck.model_copy(update={"workload": "t/y"}), plan_id="p", now=NOW)
    sim.state.jobs = [j for j in sim.state.jobs if j.id != "1"]  # its room frees up...
    next(n for n in sim.state.nodes if n.name == "a").state = "drain"  # ...on a drained node
    sim.refresh(NOW + timedelta(minutes=1))
    assert next(j for j in sim.state.jobs if j.id == "2").state is JobState.PENDING
