"""Pools whose partition their cluster does not have (a typo in the specs: ``gpu-a10O``).

``cp validate`` cannot know: it reads no cluster. Such a pool has no nodes, and work that
may run only there said it waited for "0 free" GPUs, for ever. Clusters that report
their partitions (Slurm) let the plan say what is wrong instead: the pool leaves the
work's eligible pools, and work left with none waits saying which partition is missing
and which the cluster has. A cluster that reports none (simulated, Kubernetes) is not
judged.
"""

from __future__ import annotations

from solvers import reasons
from solvers.problem.records import JobRequest, PoolInfo, PoolKey
from specs.actions import Reason
from specs.snapshot import Snapshot


def missing_partitions(observed: Snapshot, pools: dict[PoolKey, PoolInfo]) -> dict[PoolKey, Reason]:
    """Each pool whose partition its cluster does not list, with the reason work waits."""
    has = {c.name: c.partitions for c in observed.clusters if c.partitions}
    return {
        key: reasons.partition_missing(key, pool.partition, has[key[0]])
        for key, pool in sorted(pools.items())
        if key[0] in has and pool.partition is not None and pool.partition not in has[key[0]]
    }


def drop_missing(req: JobRequest, missing: dict[PoolKey, Reason]) -> None:
    """Take such pools out of the request's eligible ones; with none left, it waits for the
    first one's reason."""
    gone = [p for p in req.pools if p in missing]
    if gone:
        req.pools = [p for p in req.pools if p not in missing]
        if not req.pools and req.blocked is None:
            req.blocked = missing[gone[0]]
