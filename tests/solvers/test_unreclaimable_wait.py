"""A job that waits for room nothing could make says so.

A 16-GPU gang of a project at 0 of its deserved 20 waited a day and a half with only
"no-capacity … 2 free (largest block 2)" (trial T): nothing said that reclaim could not
help, because non-preemptible work split the free GPUs across nodes. Where even every
preemptible job of its pools evicted would leave no room for its shape, the reason says
so, and what holds the rest.
"""

from __future__ import annotations

from datetime import timedelta

from controlplane.reconcile import plan
from specs.actions import ReasonCode
from specs.desired import DesiredState
from specs.snapshot import ClusterState, Job, JobState, Node, Replica, Snapshot
from tests.builders import NOW, cluster, desired, project, workload

POOLS = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]


def _world(
    preemptible: bool, per_node: int = 1, deserved: int = 8, b_deserves: int = 8
) -> tuple[DesiredState, Snapshot]:
    """Two 8-GPU nodes, each running ``per_node`` 4-GPU serving jobs of project a
    (deserving ``deserved``); b (deserving ``b_deserves``) asks for 8."""
    names = [f"serve-{i}" for i in range(2 * per_node)]
    d = desired(
        [
            cluster(pools=POOLS),
            project("a", gpus=deserved),
            project("b", gpus=b_deserves),
            *(workload(name, "a", gpus=4, preemptible=preemptible) for name in names),
            workload("train", "b", gpus=8),
        ]
    )
    nodes = [Node(name=f"a100-0{i}", pool="a100", gpu_type="a100_80", gpus=8) for i in (1, 2)]
    jobs = [
        Job(
            id=str(100 + i),
            workload=f"a/{name}",
            state=JobState.RUNNING,
            replicas=[Replica(node=f"a100-0{i % 2 + 1}", gpus=4)],
            started_at=NOW - timedelta(hours=1),
            submitted_at=NOW - timedelta(hours=1),
            plan_id="abc",
            pool="a100",
            spec_digest=d.workloads[f"a/{name}"].spec.digest,
        )
        for i, name in enumerate(names)
    ]
    return d, Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=jobs)])


def test_a_job_no_eviction_could_make_room_for_says_what_holds_it() -> None:
    d, snap = _world(preemptible=False)
    made = plan(d, snap, now=NOW)
    assert made.actions == []
    [wait] = [p for p in made.pending if p.workload == "b/train"]
    assert wait.reason.code == ReasonCode.NO_CAPACITY
    assert wait.reason.message.endswith(
        "; even with every preemptible job of its pools evicted, no node there would have "
        "room for a replica of 8 GPUs: work no eviction frees (non-preemptible work, jobs the "
        "cluster refused to evict lately, jobs not ours) holds 8 GPUs on those nodes"
    ), wait.reason.message


def test_a_job_eviction_could_make_room_for_says_nothing_more() -> None:
    """Both nodes full of a's preemptible work, a within its deserved: reclaim may not take
    it, but evictions could make room for the shape, so no word of unmovable work."""
    d, snap = _world(preemptible=True, per_node=2, deserved=16, b_deserves=0)
    made = plan(d, snap, now=NOW)
    assert made.actions == []
    [wait] = [p for p in made.pending if p.workload == "b/train"]
    assert wait.reason.code == ReasonCode.NO_CAPACITY
    assert "even with every preemptible job" not in wait.reason.message, wait.reason.message
