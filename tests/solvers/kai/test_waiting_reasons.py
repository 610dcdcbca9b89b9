"""The reason a job waits is the one that would have to change for it to start."""

from __future__ import annotations

from adapters.simulator import nodes_from_spec
from controlplane.reconcile import plan
from specs.snapshot import ClusterState, Job, Replica, Snapshot
from tests.builders import NOW, cluster, desired, project, workload


def test_non_preemptible_work_above_deserved_is_told_so_though_a_limit_binds_too() -> None:
    """ads deserves 8 and may hold 12; its training runs on 8. A 12-GPU inference service
    is over the limit today, but raising the limit would not start it: non-preemptible
    work must fit within deserved, and 12 never fits in 8 (it said over-limit)."""
    d = desired(
        [
            cluster(),
            project("ads", gpus=8, limit=12),
            workload("train", "ads", gpus=8),
            workload("serve", "ads", gpus=4, replicas=3, type="inference"),
        ]
    )
    nodes = [n for c in d.clusters.values() for n in nodes_from_spec(c)]
    train = Job(
        id="1",
        workload="ads/train",
        replicas=[Replica(node=nodes[0].name, gpus=8)],
        started_at=NOW,
        pool=nodes[0].pool,
    )
    observed = Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=[train])])
    made = plan(d, observed, now=NOW)
    assert made.actions == []
    [waits] = made.pending
    assert waits.workload == "ads/serve"
    assert waits.reason.code.value == "non-preemptible-over-deserved", waits.reason.message


def test_one_gpu_is_singular() -> None:
    """ "needs 1 GPUs" (user trial)."""
    from solvers.reasons.words import gpu_count

    assert (gpu_count(1), gpu_count(2), gpu_count(0.5)) == ("1 GPU", "2 GPUs", "0.50 GPUs")
