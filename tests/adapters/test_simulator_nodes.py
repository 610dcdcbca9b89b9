"""The simulator's hardware follows its Cluster spec: a node removed from a pool takes its
jobs down with it, as a real cluster's failed node does (NODE_FAIL), recorded in the
cluster's accounting; they did not silently vanish (user trial: a pool shrunk from two
nodes to one lost two running workloads from the history and from usage)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from adapters.base import LocalStateError
from adapters.simulator import SimulatorAdapter
from specs.actions import Action, Op, Reason, ReasonCode, SubmitDetails
from specs.models import Cluster
from specs.snapshot import JobState, Replica
from tests.builders import NOW, cluster, pool


def sim_cluster(nodes: int) -> Cluster:
    return Cluster.model_validate(cluster("c", pools=[pool("a100", nodes=nodes)]))


def submit(workload: str, node: str) -> Action:
    return Action(
        op=Op.SUBMIT,
        workload=workload,
        cluster="c",
        pool="a100",
        replicas=[Replica(node=node, gpus=8)],
        submit=SubmitDetails(gpus_per_replica=8, gpu_type="a100_80"),
        reason=Reason(code=ReasonCode.WITHIN_DESERVED, message="x"),
    )


def test_a_removed_node_fails_its_jobs(tmp_path: Path) -> None:
    clock = [NOW]
    two = SimulatorAdapter(sim_cluster(2), state_dir=tmp_path, clock=lambda: clock[0])
    nodes = sorted(n.name for n in two.observe().nodes)
    assert two.execute(submit("p/stays", nodes[0]), plan_id="x").ok
    assert two.execute(submit("p/lost", nodes[1]), plan_id="x").ok
    clock[0] = NOW + timedelta(hours=1)
    one = SimulatorAdapter(sim_cluster(1), state_dir=tmp_path, clock=lambda: clock[0])
    seen = {j.workload: j for j in one.observe().jobs}
    assert seen["p/stays"].state == JobState.RUNNING
    assert seen["p/lost"].state == JobState.NODE_FAIL
    assert seen["p/lost"].ended_at == clock[0]
    [run] = [r for r in one.runs(NOW, clock[0]) if r.workload == "p/lost"]
    assert (run.state, run.ended_at) == (JobState.NODE_FAIL, clock[0])
    assert sum(n.gpus for n in one.observe().nodes) == 8


def test_the_clock_only_moves_on_but_a_what_if_may_look_back(tmp_path: Path) -> None:
    """An apply at a --now before the last one was accepted: a job that had ended ran
    again, and history was recorded out of order (user trial). A writing adapter refuses;
    a read-only one (cp plan, a what-if at any --now) still answers."""
    clock = [NOW]
    sim = SimulatorAdapter(sim_cluster(1), state_dir=tmp_path, clock=lambda: clock[0])
    node = sim.observe().nodes[0].name
    assert sim.execute(submit("p/w", node), plan_id="x").ok
    clock[0] = NOW - timedelta(minutes=5)
    with pytest.raises(LocalStateError, match="would run its clock backwards"):
        sim.observe()
    with pytest.raises(LocalStateError, match="give a later --now"):
        sim.execute(submit("p/v", node), plan_id="y")
    looking = SimulatorAdapter(
        sim_cluster(1), state_dir=tmp_path, clock=lambda: clock[0], read_only=True
    )
    assert [j.workload for j in looking.observe().jobs] == ["p/w"]
    clock[0] = NOW
    assert [j.workload for j in sim.observe().jobs] == ["p/w"]
