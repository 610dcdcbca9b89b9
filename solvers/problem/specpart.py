"""The part of a problem that depends on the specs alone (queues, pools, one request
template per workload), built once per spec digest and reused across plans
(:class:`ProblemCache`).

And on the limits the clusters set on pools (a Slurm partition's MaxTime), which bound
the pools' ``maxWalltime`` beside the specs': they rarely change, so they are part of
the key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from solvers import reasons
from solvers.problem.records import JobRequest, PoolInfo, PoolKey, Queue, TypeQuota
from specs.desired import DesiredState
from specs.hierarchy import ROOT, build_tree
from specs.models import Workload
from specs.snapshot import Snapshot


@dataclass(frozen=True)
class SpecPart:
    """What a problem takes from the specs alone: the queue tree, the pools, and each
    workload's request before the snapshot says where it stands (``created`` unset)."""

    queues: dict[str, Queue]
    top: list[str]
    pools: dict[PoolKey, PoolInfo]
    requests: dict[str, JobRequest]
    desired: DesiredState  # what it was built from
    limits: Limits  # and the clusters' limits on pools


# the longest walltime (seconds) each cluster lets a pool's jobs have, where it sets one
Limits = Mapping[PoolKey, int]


class ProblemCache:
    """The spec part of problems, kept by the specs' digest (the last few), so the rounds of
    one plan and the plans of one process (``cp watch``) build it once per spec change;
    after a change that leaves clusters, departments and projects alone, only the
    workloads that changed are built again (comparing specs costs a tenth of building).

    Only for specs whose digest is a content hash (the loader's); the cache trusts it."""

    def __init__(self, size: int = 2) -> None:
        self.size = size
        self._parts: dict[tuple[str, frozenset[tuple[PoolKey, int]]], SpecPart] = {}

    def spec_part(self, desired: DesiredState, limits: Limits | None = None) -> SpecPart:
        limits = limits or {}
        key = (desired.digest, frozenset(limits.items()))
        part = self._parts.get(key)
        if part is None:
            part = spec_part(desired, self._same_org(desired, limits), limits)
            self._parts[key] = part
            while len(self._parts) > self.size:
                del self._parts[next(iter(self._parts))]
        return part

    def _same_org(self, desired: DesiredState, limits: Limits) -> SpecPart | None:
        for part in reversed(self._parts.values()):
            old = part.desired
            if (
                part.limits == limits
                and old.clusters == desired.clusters
                and old.departments == desired.departments
                and old.projects == desired.projects
            ):
                return part
        return None


def spec_part(
    desired: DesiredState, previous: SpecPart | None = None, limits: Limits | None = None
) -> SpecPart:
    """The spec part of ``desired`` under the clusters' ``limits``; ``previous``, built
    from specs with the same clusters, departments and projects and the same limits,
    lends its queues, pools and the requests of unchanged workloads."""
    limits = dict(limits or {})
    if previous is not None:
        queues, top, pools = previous.queues, previous.top, previous.pools
        old = previous.desired.workloads
    else:
        queues, top = _queues(desired)
        pools = _pools(desired, limits)
        old = {}
    epoch = datetime.min  # set from the snapshot when a problem is built
    requests = {}
    for key, wl in sorted(desired.workloads.items()):
        if previous is not None and old.get(key) == wl:
            requests[key] = previous.requests[key]
        else:
            requests[key] = job_request(key, wl, desired, pools, epoch)
    return SpecPart(queues, top, pools, requests, desired, limits)


def _queues(desired: DesiredState) -> tuple[dict[str, Queue], list[str]]:
    tree = build_tree(desired)
    queues: dict[str, Queue] = {}
    for qid, data in tree.nodes(data=True):
        if qid == ROOT:
            continue
        parent = next(iter(tree.predecessors(qid)), ROOT)
        quota = data["quota"]
        per_type = data["per_type"]
        queues[qid] = Queue(
            id=qid,
            name=data["name"],
            kind=data["kind"],
            parent=None if parent == ROOT else parent,
            deserved=quota.gpus,
            limit=quota.limit,
            weight=quota.over_quota_weight,
            priority=data["rank"],
            children=sorted(tree.successors(qid)),
            typed=None
            if per_type is None
            else {t.gpu_type: TypeQuota(t.gpus, t.limit) for t in per_type},
        )
    top = sorted(tree.successors(ROOT))
    return queues, top


def _pools(desired: DesiredState, limits: Limits) -> dict[PoolKey, PoolInfo]:
    """The pools, each with the shorter of its own maxWalltime and its cluster's."""
    out = {}
    for cname, cluster in sorted(desired.clusters.items()):
        account = cluster.spec.slurm.account if cluster.spec.slurm else None
        for pool in cluster.spec.node_pools:
            gt = cluster.spec.gpu_types.get(pool.gpu_type)
            out[(cname, pool.name)] = PoolInfo(
                key=(cname, pool.name),
                gpu_type=pool.gpu_type,
                memory_gib=gt.memory_gib if gt else 0.0,
                gpus_per_node=pool.gpus_per_node,
                partition=pool.partition,
                max_walltime=_shorter(pool.max_walltime, limits.get((cname, pool.name))),
                cluster_max_walltime=limits.get((cname, pool.name)),
                cost_per_gpu_hour=gt.cost_per_gpu_hour if gt else 0.0,
                account=account,
                one_replica_per_node=cluster.spec.adapter == "slurm",
                resize_restarts=cluster.spec.adapter == "slurm",
            )
    return out


def pool_limits(observed: Snapshot) -> dict[PoolKey, int]:
    """The longest walltime each cluster lets a pool's jobs have, where it sets one (a
    Slurm partition's MaxTime), as ``observed`` reports it."""
    return {
        (c.name, p.name): p.max_walltime
        for c in observed.clusters
        for p in c.pools
        if p.max_walltime is not None
    }


def workload_pools(desired: DesiredState, key: str, observed: Snapshot) -> list[PoolKey]:
    """The pools workload ``key`` may use under the clusters' limits in ``observed``, as a
    plan's problem has them (none for a workload not in the specs)."""
    wl = desired.workloads.get(key)
    if wl is None:
        return []
    return eligible_pools(wl, desired, _pools(desired, pool_limits(observed)))


def _shorter(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def eligible_pools(
    wl: Workload, desired: DesiredState, pools: dict[PoolKey, PoolInfo]
) -> list[PoolKey]:
    """Pools whose name, GPU type, memory, cluster, node size and walltime suit the workload."""
    return [k for k in _suited(wl, pools) if _within(wl.spec.walltime, pools[k].max_walltime)]


def _within(walltime: int | None, limit: int | None) -> bool:
    return walltime is None or limit is None or walltime <= limit


def _suited(wl: Workload, pools: dict[PoolKey, PoolInfo]) -> list[PoolKey]:
    """Pools that suit the workload but for their time limits (the specs' and the
    clusters' own)."""
    spec = wl.spec
    out = []
    for key, pool in pools.items():
        if spec.clusters is not None and key[0] not in spec.clusters:
            continue
        if spec.node_pools is not None and key[1] not in spec.node_pools:
            continue
        if spec.gpu_types is not None and pool.gpu_type not in spec.gpu_types:
            continue
        if spec.min_gpu_memory_gib is not None and pool.memory_gib < spec.min_gpu_memory_gib:
            continue
        if pool.gpus_per_node < spec.gpus:
            continue
        out.append(key)
    return sorted(out)


def job_request(
    key: str,
    wl: Workload,
    desired: DesiredState,
    pools: dict[PoolKey, PoolInfo],
    created: datetime,
) -> JobRequest:
    spec = wl.spec
    req = JobRequest(
        key=key,
        queue=f"project:{spec.project}",
        priority=spec.effective_priority,
        preemptible=spec.is_preemptible,
        gpus=spec.gpus,
        replicas=spec.replicas,
        min_replicas=spec.effective_min_replicas,
        created=created,
        pools=eligible_pools(wl, desired, pools),
        walltime=spec.walltime,
        fan_out=spec.strategy is not None and spec.strategy.fan_out,
    )
    project = desired.projects.get(spec.project)
    req.min_runtime = project.spec.min_runtime if project else None
    limit = project.spec.max_walltime if project else None
    req.max_walltime = limit
    if limit is not None and spec.walltime is not None and spec.walltime > limit:
        req.blocked = reasons.walltime_exceeds(spec.walltime, spec.project, limit)
    elif not req.pools:
        # time limits turned every suited pool away: the specs' (cp validate refuses those)
        # or, where the specs could not know, the clusters' own
        over = [
            pools[k]
            for k in _suited(wl, pools)
            if not _within(spec.walltime, pools[k].cluster_max_walltime)
        ]
        if over and spec.walltime is not None and not req.fan_out:  # fan-out: candidates
            req.blocked = reasons.walltime_exceeds_cluster(
                spec.walltime, [(p.key, p.partition, p.cluster_max_walltime or 0) for p in over]
            )
        else:
            req.blocked = reasons.no_eligible_pool(spec.gpus)
    return req
