"""A node pool whose ``partition`` the cluster does not have (a typo: ``gpu-a10O``).

``cp validate`` cannot know (it does not contact clusters), and the plan said only that
the pool had "0 free": the work waited for ever for capacity that does not exist. The
cluster reports its partitions (Slurm: the ones sinfo lists) and the plan says plainly
that the pool's partition is not among them.
"""

from __future__ import annotations

from controlplane.reconcile import plan
from specs.actions import Op, ReasonCode
from specs.snapshot import ClusterState, Node, Snapshot
from tests.builders import NOW, cluster, desired, pool, project, workload

POOLS = [
    pool("a100", nodes=1, partition="gpu-a100"),
    pool("a10", gpu_type="a10", gpus_per_node=4, nodes=0, partition="gpu-a10O"),
]
TYPES = {"a100_80": {"memoryGiB": 80}, "a10": {"memoryGiB": 24}}
HAS = ["debug", "gpu-a100", "gpu-v100"]


def _world(partitions: list[str], **spec: object) -> tuple[object, Snapshot]:
    d = desired(
        [
            cluster(pools=POOLS, gpu_types=TYPES, adapter="slurm"),
            project("p", gpus=16),
            workload("a", "p", gpus=2, **spec),
        ]
    )
    node = Node(name="a100-1", pool="a100", gpu_type="a100_80", gpus=8, partition="gpu-a100")
    state = ClusterState(name="sim", nodes=[node], partitions=partitions)
    return d, Snapshot(now=NOW, clusters=[state])


def test_work_for_a_pool_whose_partition_the_cluster_lacks_waits_saying_so() -> None:
    d, snap = _world(HAS, gpuTypes=["a10"])
    p = plan(d, snap, now=NOW)  # type: ignore[arg-type]
    assert p.actions == []
    [waiting] = p.pending
    assert waiting.reason.code == ReasonCode.NO_ELIGIBLE_POOL
    assert waiting.reason.message == (
        "pool sim/a10 asks for partition gpu-a10O, which cluster sim does not have "
        "(it has debug, gpu-a100, gpu-v100): fix the pool's partition in the specs"
    )


def test_work_that_may_also_use_another_pool_runs_there() -> None:
    d, snap = _world(HAS)
    p = plan(d, snap, now=NOW)  # type: ignore[arg-type]
    assert [(a.op, a.pool) for a in p.actions] == [(Op.SUBMIT, "a100")]


def test_a_cluster_that_reports_no_partitions_is_not_judged() -> None:
    """A simulated or Kubernetes cluster, or a snapshot saved before clusters reported
    them: the pool simply has no nodes."""
    d, snap = _world([], gpuTypes=["a10"])
    [waiting] = plan(d, snap, now=NOW).pending  # type: ignore[arg-type]
    assert waiting.reason.code == ReasonCode.NO_CAPACITY
    assert "partitions" not in snap.clusters[0].model_dump(by_alias=True, exclude_unset=False)
