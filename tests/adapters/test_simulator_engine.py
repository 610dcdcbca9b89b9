"""The simulator engine carries out a plan's actions in one run (``execute_many``, what the
reconciler's virtual world uses) exactly as it does one action at a time."""

from __future__ import annotations

import pytest

from adapters.base import PermanentError
from adapters.simulator import SimulatedCluster
from specs.actions import Action, Op, Reason, ReasonCode, SubmitDetails
from specs.snapshot import ClusterState, Job, Node, Replica
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
