"""A job of ours waiting in a cluster's queue for nodes that other work holds now.

The plan pinned it to nodes (Slurm's ``--nodelist``); someone else's job took them before
it started, and it waited there for ever while GPUs stood idle elsewhere: every later plan
said "no changes" (user trial on real Slurm). It is cancelled and the workload planned
again, where it fits now.
"""

from __future__ import annotations

from datetime import timedelta

from controlplane.reconcile import plan
from specs.actions import Op, ReasonCode
from specs.snapshot import ClusterState, Job, JobState, Node, Replica, Snapshot
from tests.builders import NOW, cluster, desired, project, workload

POOLS = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]


def _world(
    taken: bool, state: JobState = JobState.RUNNING, late_gpus: int = 8
) -> tuple[object, Snapshot]:
    """``late`` (8 GPUs) queued for a100-01; with ``taken``, somebody else's 4-GPU job
    is there, in ``state``."""
    d = desired([cluster(pools=POOLS), project("p", gpus=8), workload("late", "p", gpus=late_gpus)])
    nodes = [Node(name=f"a100-0{i}", pool="a100", gpu_type="a100_80", gpus=8) for i in (1, 2)]
    jobs = [
        Job(
            id="7",
            workload="p/late",
            state=JobState.PENDING,
            submitted_at=NOW - timedelta(minutes=10),
            replicas=[Replica(node="a100-01", gpus=late_gpus)],
            plan_id="abc",
            pool="a100",
            reason="Resources",
            spec_digest=d.workloads["p/late"].spec.digest,
        )
    ]
    if taken:
        jobs.append(
            Job(
                id="9",
                workload=None,
                state=state,
                replicas=[Replica(node="a100-01", gpus=4)],
                started_at=NOW - timedelta(minutes=5),
                pool="a100",
            )
        )
    return d, Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=jobs)])


def test_a_queued_job_whose_nodes_others_took_is_planned_again() -> None:
    d, snap = _world(taken=True)
    p = plan(d, snap, now=NOW)  # type: ignore[arg-type]
    ops = [(a.op, a.workload, a.job) for a in p.actions]
    assert ops == [(Op.SUBMIT, "p/late", None), (Op.CANCEL, "p/late", "7")]
    [submit, cancel] = p.actions
    assert [r.node for r in submit.replicas or []] == ["a100-02"]
    assert cancel.reason.code == ReasonCode.NO_CAPACITY
    assert "a100-01" in cancel.reason.message and "cancelled" in cancel.reason.message


def test_a_queued_job_whose_nodes_are_free_or_unpinned_waits_on() -> None:
    d, snap = _world(taken=False)  # its node is free: the cluster will start it
    p = plan(d, snap, now=NOW)  # type: ignore[arg-type]
    assert p.actions == [] and [x.reason.code for x in p.pending] == [ReasonCode.SUBMITTED]


def test_a_queued_job_waits_for_a_victim_winding_down_on_its_nodes() -> None:
    """The plan that pinned it preempted what held its node; the victim ends within its
    grace (Slurm's KillWait, a pod's termination grace) and is seen COMPLETING meanwhile.
    A plan made then cancelled the queued job as stranded and looked for room elsewhere,
    though the node was about to free up."""
    d, snap = _world(taken=True, state=JobState.COMPLETING)
    p = plan(d, snap, now=NOW)  # type: ignore[arg-type]
    assert p.actions == [] and [x.reason.code for x in p.pending] == [ReasonCode.SUBMITTED]


def test_a_queued_job_waits_for_a_job_the_plan_prunes_on_its_nodes() -> None:
    """The job on its node is pruned by this very plan: its GPUs are coming, the queued
    job is not cancelled and placed again."""
    d, snap = _world(taken=True)
    snap.clusters[0].jobs[1].workload = "p/gone"  # ours, and no longer in the specs
    p = plan(d, snap, now=NOW)  # type: ignore[arg-type]
    assert [(a.op, a.workload) for a in p.actions] == [(Op.CANCEL, "p/gone")]


def test_a_job_bound_to_a_node_that_left_the_cluster_says_so() -> None:
    """A running job whose node was deleted under it (Kubernetes) read as having "waited in
    the cluster's queue for h100-0" (user trial): it never waited in a queue. The node is
    gone, and the reason says that."""
    d, snap = _world(taken=False)
    snap.clusters[0].nodes = [n for n in snap.clusters[0].nodes if n.name != "a100-01"]
    snap.clusters[0].jobs[0].reason = "bound to a100-01, which the cluster no longer has"
    cancel = next(a for a in plan(d, snap, now=NOW).actions if a.op == Op.CANCEL)  # type: ignore[arg-type]
    assert "a100-01, which the cluster no longer has" in cancel.reason.message
    assert "waited in the cluster's queue" not in cancel.reason.message


def test_a_node_that_takes_no_new_job_strands_the_job_queued_there() -> None:
    """Somebody else's job holds 4 GPUs and all the CPUs of a100-01 (Slurm reports it
    ALLOCATED): no job can start there, however many GPUs are free. The plan had pinned
    ``late`` there (the tightest fit by GPUs) and kept it waiting for ever while a100-02
    stood idle (user trial on real Slurm). It is cancelled and placed on a100-02, and no
    new work goes to a100-01."""
    d, snap = _world(taken=True, late_gpus=4)
    snap.clusters[0].nodes[0].full = True
    p = plan(d, snap, now=NOW)  # type: ignore[arg-type]
    assert [(a.op, a.workload, a.job) for a in p.actions] == [
        (Op.SUBMIT, "p/late", None),
        (Op.CANCEL, "p/late", "7"),
    ]
    assert [r.node for r in p.actions[0].replicas or []] == ["a100-02"]
