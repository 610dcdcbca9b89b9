"""The simulator's hardware follows its Cluster spec: a node removed from a pool drains (it
takes no new work) and leaves once no job of it is active; the plan moves the work off it,
with approval. It used to take its jobs down with it (NODE_FAIL) at any observation, so a
`cp observe` or a declined apply ended running work (user trial)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from adapters.base import LocalStateError, PermanentError
from adapters.simulator import SimulatorAdapter
from specs.actions import Action, Op, Reason, ReasonCode, SubmitDetails
from specs.models import Cluster
from specs.snapshot import JobState, Replica
from tests.builders import NOW, cluster, pool


def sim_cluster(nodes: int, gpus_per_node: int = 8) -> Cluster:
    return Cluster.model_validate(
        cluster("c", pools=[pool("a100", nodes=nodes, gpus_per_node=gpus_per_node)])
    )


def submit(workload: str, node: str, gpus: int = 8) -> Action:
    return Action(
        op=Op.SUBMIT,
        workload=workload,
        cluster="c",
        pool="a100",
        replicas=[Replica(node=node, gpus=gpus)],
        submit=SubmitDetails(gpus_per_replica=gpus, gpu_type="a100_80"),
        reason=Reason(code=ReasonCode.WITHIN_DESERVED, message="x"),
    )


def test_a_removed_node_drains_until_its_work_has_left(tmp_path: Path) -> None:
    clock = [NOW]
    two = SimulatorAdapter(sim_cluster(2), state_dir=tmp_path, clock=lambda: clock[0])
    nodes = sorted(n.name for n in two.observe().nodes)
    assert two.execute(submit("p/stays", nodes[0]), plan_id="x").ok
    assert two.execute(submit("p/moves", nodes[1]), plan_id="x").ok
    clock[0] = NOW + timedelta(hours=1)
    one = SimulatorAdapter(sim_cluster(1), state_dir=tmp_path, clock=lambda: clock[0])
    seen = one.observe()
    assert {j.workload: j.state for j in seen.jobs} == {
        "p/stays": JobState.RUNNING,
        "p/moves": JobState.RUNNING,
    }
    assert seen.removed_nodes == [nodes[1]]
    assert {n.name: n.schedulable for n in seen.nodes} == {nodes[0]: True, nodes[1]: False}
    [job] = [j for j in seen.jobs if j.workload == "p/moves"]
    cancel = Action(
        op=Op.CANCEL,
        workload="p/moves",
        cluster="c",
        job=job.id,
        reason=Reason(code=ReasonCode.SPEC_CHANGED, message="x"),
    )
    assert one.execute(cancel, plan_id="y").ok
    after = one.observe()
    assert [n.name for n in after.nodes] == [nodes[0]] and after.removed_nodes == []
    # back in the spec (before it left): it takes work again
    three = SimulatorAdapter(sim_cluster(2), state_dir=tmp_path, clock=lambda: clock[0])
    assert all(n.schedulable for n in three.observe().nodes)


def test_a_node_back_in_the_spec_while_it_drains_takes_work_again(tmp_path: Path) -> None:
    clock = [NOW]
    two = SimulatorAdapter(sim_cluster(2), state_dir=tmp_path, clock=lambda: clock[0])
    nodes = sorted(n.name for n in two.observe().nodes)
    assert two.execute(submit("p/w", nodes[1]), plan_id="x").ok
    one = SimulatorAdapter(sim_cluster(1), state_dir=tmp_path, clock=lambda: clock[0])
    assert [n.schedulable for n in one.observe().nodes] == [True, False]
    back = SimulatorAdapter(sim_cluster(2), state_dir=tmp_path, clock=lambda: clock[0]).observe()
    assert [n.schedulable for n in back.nodes] == [True, True] and back.removed_nodes == []


def test_a_node_shrunk_below_its_work_is_reported_until_the_work_fits(tmp_path: Path) -> None:
    """gpusPerNode lowered under running work: the nodes took the new size under their
    jobs, over-committed, and nothing said so: the plan said "No changes now" (user
    trial). A node whose work holds more than its new size is reported shrinking (the
    plan moves off what does not fit); no new work fits there meanwhile."""
    clock = [NOW]
    eight = SimulatorAdapter(sim_cluster(2), state_dir=tmp_path, clock=lambda: clock[0])
    nodes = sorted(n.name for n in eight.observe().nodes)
    assert eight.execute(submit("p/big", nodes[0], gpus=6), plan_id="x").ok
    assert eight.execute(submit("p/fits", nodes[1], gpus=4), plan_id="x").ok
    four = SimulatorAdapter(sim_cluster(2, 4), state_dir=tmp_path, clock=lambda: clock[0])
    seen = four.observe()
    assert seen.shrinking_nodes == {nodes[0]: 4}  # 6 GPUs of work on 4; the other fits
    assert {n.name: n.gpus for n in seen.nodes} == {nodes[0]: 4, nodes[1]: 4}
    assert {j.workload: j.state for j in seen.jobs} == {
        "p/big": JobState.RUNNING,
        "p/fits": JobState.RUNNING,
    }
    with pytest.raises(PermanentError, match="has 4 GPUs"):  # no room for new work
        four.execute(submit("p/more", nodes[0], gpus=1), plan_id="y")
    [big] = [j for j in seen.jobs if j.workload == "p/big"]
    cancel = Action(
        op=Op.CANCEL,
        workload="p/big",
        cluster="c",
        job=big.id,
        reason=Reason(code=ReasonCode.SPEC_CHANGED, message="x"),
    )
    assert four.execute(cancel, plan_id="y").ok
    assert four.observe().shrinking_nodes == {}


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
    # the advice fits every command: cp watch has no --now (user trial)
    with pytest.raises(LocalStateError, match="a later --now \\(cp watch has none"):
        sim.execute(submit("p/v", node), plan_id="y")
    looking = SimulatorAdapter(
        sim_cluster(1), state_dir=tmp_path, clock=lambda: clock[0], read_only=True
    )
    assert [j.workload for j in looking.observe().jobs] == ["p/w"]
    clock[0] = NOW
    assert [j.workload for j in sim.observe().jobs] == ["p/w"]


def test_work_that_ended_meanwhile_no_longer_holds_a_node_shrunk_or_removed(
    tmp_path: Path,
) -> None:
    """Nodes were marked shrinking (or left draining) as their jobs were before the clock
    moved on: work that had completed since still held them in the report, and read-only
    observations (every `cp plan`) said so until something recorded (code review)."""
    clock = [NOW]
    two = SimulatorAdapter(sim_cluster(2), state_dir=tmp_path, clock=lambda: clock[0])
    nodes = sorted(n.name for n in two.observe().nodes)
    short = submit("p/short", nodes[0], gpus=6)
    assert short.submit is not None
    ten_minutes = short.submit.model_copy(update={"walltime": 600})
    assert two.execute(short.model_copy(update={"submit": ten_minutes}), plan_id="x").ok
    assert two.execute(submit("p/gone", nodes[1]), plan_id="x").ok
    clock[0] = NOW + timedelta(hours=1)  # p/short's 10 minutes are long over
    looking = SimulatorAdapter(
        sim_cluster(1, 4), state_dir=tmp_path, clock=lambda: clock[0], read_only=True
    )
    seen = looking.observe()
    assert seen.shrinking_nodes == {}, seen.shrinking_nodes  # its work has ended
    assert seen.removed_nodes == [nodes[1]]  # p/gone runs on there
