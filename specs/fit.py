"""Whether one replica of a workload can run on a node of a pool, and if not why.

Both the error for a workload no pool can ever hold (specs/validate.py) and the warning
for a gang bigger than every pool it may use (specs/gangs.py) need the pools a workload
may run in: one reading of its clusters, gpuTypes, nodePools, memory, GPUs per replica
and walltime (checkpoint segments of a fan-out workload: ``in_segments``) against each
pool, so the two never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from specs.desired import DesiredState
from specs.durations import format_duration
from specs.models import Cluster, NodePool, Workload

Pools = list[tuple[Cluster, NodePool]]


class Usable:
    """The pools a replica of a workload may run in, worked out once per distinct ask (the
    fields :func:`shortfalls` reads): thousands of workloads ask alike."""

    def __init__(self, desired: DesiredState) -> None:
        self.desired = desired
        self._known: dict[tuple[object, ...], Pools] = {}

    def __call__(self, workload: Workload) -> Pools:
        spec = workload.spec
        ask = (
            None if spec.clusters is None else tuple(spec.clusters),
            None if spec.gpu_types is None else tuple(spec.gpu_types),
            None if spec.node_pools is None else tuple(spec.node_pools),
            spec.min_gpu_memory_gib,
            spec.gpus,
            spec.walltime,
            spec.strategy is not None and spec.strategy.fan_out,
            spec.checkpoint,
        )
        found = self._known.get(ask)
        if found is None:
            found = self._known[ask] = [
                (cluster, pool)
                for cluster in self.desired.clusters.values()
                for pool in cluster.spec.node_pools
                if not shortfalls(workload, cluster, pool)
            ]
        return found


@dataclass(frozen=True)
class Shortfall:
    field: str
    reason: str


def shortfalls(workload: Workload, cluster: Cluster, pool: NodePool) -> list[Shortfall]:
    """Why one replica of ``workload`` can never run on a node of ``pool``."""
    spec = workload.spec
    gpu = cluster.spec.gpu_types.get(pool.gpu_type)
    out = []
    if spec.clusters is not None and cluster.metadata.name not in spec.clusters:
        out.append(
            Shortfall("spec.clusters", f"cluster '{cluster.metadata.name}' is not in clusters")
        )
    if spec.node_pools is not None and pool.name not in spec.node_pools:
        out.append(Shortfall("spec.nodePools", f"pool '{pool.name}' is not in nodePools"))
    if spec.gpu_types is not None and pool.gpu_type not in spec.gpu_types:
        out.append(Shortfall("spec.gpuTypes", f"gpuType '{pool.gpu_type}' is not in gpuTypes"))
    need_memory = spec.min_gpu_memory_gib
    if need_memory is not None and (gpu is None or gpu.memory_gib < need_memory):
        has = f"{gpu.memory_gib:g} GiB" if gpu is not None else "unknown memory"
        out.append(
            Shortfall(
                "spec.minGpuMemoryGiB",
                f"its GPUs have {has}, below minGpuMemoryGiB {need_memory:g}",
            )
        )
    if pool.gpus_per_node < spec.gpus:
        out.append(
            Shortfall(
                "spec.gpus",
                f"it has {pool.gpus_per_node} GPUs per node, fewer than the "
                f"{spec.gpus} each replica needs",
            )
        )
    if (
        spec.walltime is not None
        and pool.max_walltime is not None
        and spec.walltime > pool.max_walltime
        and not in_segments(workload, pool.max_walltime)
    ):
        out.append(
            Shortfall(
                "spec.walltime",
                f"its maxWalltime {format_duration(pool.max_walltime)} is shorter than "
                f"walltime {format_duration(spec.walltime)}",
            )
        )
    return out


def in_segments(workload: Workload, limit: int) -> bool:
    """Whether ``workload`` runs in a pool whose maxWalltime ``limit`` is shorter than its
    walltime all the same: a fan-out workload that runs in checkpoint segments takes such a
    pool in segments of that length, each longer than its grace (docs/strategies.md,
    checkpoint mode)."""
    spec, ck = workload.spec, workload.spec.checkpoint
    return (
        spec.strategy is not None
        and spec.strategy.fan_out
        and ck is not None
        and ck.total is not None
        and spec.walltime is not None
        and spec.walltime > ck.grace
        and limit > ck.grace
    )


def gpu_memory(cluster: Cluster, pool: NodePool) -> float:
    gpu = cluster.spec.gpu_types.get(pool.gpu_type)
    return gpu.memory_gib if gpu is not None else 0.0
