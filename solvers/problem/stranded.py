"""Jobs of ours that wait in a cluster's queue where they cannot start.

The plan pinned each to nodes (Slurm's ``--nodelist``). If others took the GPUs since,
the node was drained or left, or a reservation (an announced maintenance) begins before
the job would end, the cluster keeps it waiting there while GPUs may stand idle
elsewhere: such a job is cancelled and its workload placed again where it fits.
"""

from __future__ import annotations

from solvers.problem.records import NodeInfo, node_key
from specs.snapshot import Job


def stranded_on(queued: list[tuple[str, Job]], nodes: dict[str, NodeInfo]) -> bool:
    """Jobs waiting in a cluster's queue, each pinned to nodes (the plan placed it) of
    which one cannot hold it as the clusters stand: running work holds its GPUs, it is
    drained or gone, or a reservation it would run into begins first. Nothing the plans
    do will make room there, while GPUs may be idle elsewhere. Work winding down there
    (the victims of the plan that pinned it, within their grace) makes room as it ends. A
    fan-out candidate, which the cluster places, is never stranded."""
    return all(j.candidate is None and bool(stuck_on(cluster, j, nodes)) for cluster, j in queued)


def stuck_on(cluster: str, job: Job, nodes: dict[str, NodeInfo]) -> list[str]:
    """The nodes a queued job is pinned to that cannot hold its replicas now (none if it
    is not pinned: the cluster places it)."""
    asks: dict[str, int] = {}
    for r in job.replicas:
        if r.node is None:
            return []
        asks[r.node] = asks.get(r.node, 0) + r.gpus
    return [
        name
        for name, gpus in sorted(asks.items())
        if (n := nodes.get(node_key(cluster, name))) is None
        or not n.schedulable
        or n.capacity - n.used + n.leaving < gpus
        or n.runs_into(job.walltime)  # a reservation: the cluster will not start it there
    ]
