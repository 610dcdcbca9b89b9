"""Jobs of ours that wait in a cluster's queue count as the work they are about to be.

A job an earlier plan submitted waits in the cluster's queue (Slurm starts it within
seconds, or once a victim has ended). Until it started, plans left it out of every queue's
allocation: a project at its ``limit`` was given more work beside it, which ran over the
limit once both started and was taken back by the plan after; and the node it was pinned
to looked free, so another workload could be planned onto it.
"""

from __future__ import annotations

from datetime import timedelta

from controlplane.reconcile import plan
from specs.actions import Op, ReasonCode
from specs.desired import DesiredState
from specs.snapshot import ClusterState, Job, JobState, Node, Replica, Snapshot
from tests.builders import NOW, cluster, desired, project, workload

POOLS = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]


def _world(*docs: dict[str, object], pinned: bool = True) -> tuple[DesiredState, Snapshot]:
    """``p/first`` (8 GPUs) queued in the cluster, pinned to a100-01 or placed by it."""
    d = desired([cluster(pools=POOLS), workload("first", "p", gpus=8), *docs])
    nodes = [Node(name=f"a100-0{i}", pool="a100", gpu_type="a100_80", gpus=8) for i in (1, 2)]
    queued = Job(
        id="7",
        workload="p/first",
        state=JobState.PENDING,
        submitted_at=NOW - timedelta(seconds=20),
        replicas=[Replica(node="a100-01" if pinned else None, gpus=8)],
        plan_id="abc",
        pool="a100",
        reason="Priority",
        spec_digest=d.workloads["p/first"].spec.digest,
    )
    snap = Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=[queued])])
    return d, snap


def test_a_queued_job_counts_against_its_projects_limit() -> None:
    d, snap = _world(project("p", gpus=8, limit=8), workload("second", "p", gpus=8))
    p = plan(d, snap, now=NOW)
    assert p.actions == []
    why = {x.workload: x.reason.code for x in p.pending}
    assert why == {"p/first": ReasonCode.SUBMITTED, "p/second": ReasonCode.OVER_LIMIT}


def test_a_queued_job_holds_the_node_it_is_pinned_to() -> None:
    d, snap = _world(project("p", gpus=8), project("q", gpus=8), workload("other", "q", gpus=8))
    p = plan(d, snap, now=NOW)
    [submit] = p.actions
    assert submit.op == Op.SUBMIT and submit.workload == "q/other"
    assert [r.node for r in submit.replicas or []] == ["a100-02"]


def test_a_queued_job_the_cluster_places_holds_room_somewhere() -> None:
    docs = (project("p", gpus=8), project("q", gpus=8))
    d, snap = _world(
        *docs, workload("other", "q", gpus=8), workload("more", "q", gpus=8), pinned=False
    )
    p = plan(d, snap, now=NOW)
    assert [a.op for a in p.actions] == [Op.SUBMIT]  # one node is left for q's two


def test_a_queued_job_asks_for_its_share() -> None:
    """Its GPUs were charged to its project but left out of what the project asks for, so
    the over-quota split gave the project nothing for them: it looked over its fair share
    with GPUs it is about to use."""
    docs = (project("p", gpus=0), project("q", gpus=0), workload("big", "q", gpus=8, replicas=2))
    d, snap = _world(*docs)
    p = plan(d, snap, now=NOW)
    assert (p.projects["p"].fair_share, p.projects["q"].fair_share) == (8, 8)
    assert (p.projects["p"].allocated, p.projects["q"].allocated) == (8, 0)
