"""The scheduling problem: desired and observed state joined into plain solver records.

Everything the allocators need, and nothing they must look up again: queues (departments
and projects) with quotas, nodes with free GPUs, and one :class:`JobRequest` per workload
with its current placement (if running) and the pools it may use. Pure: ``now`` is an
argument, no clock is read.

Fan-out workloads (``strategy.fanOut``) are the exception: the cluster's own scheduler
picks among their candidate submissions, so KAI's allocator never places them. Until one
of their jobs runs they are kept in ``fan_out`` (:func:`set_aside_fan_out`), and their
several waiting jobs are ``candidates``, not duplicates; once one runs, the others are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from solvers import reasons
from solvers.order import job_id_order
from solvers.segments import Segments, progress_from_jobs, segments_of
from specs.actions import Reason
from specs.desired import DesiredState
from specs.hierarchy import ROOT, build_tree
from specs.models import Workload
from specs.snapshot import Job, JobState, Snapshot

PoolKey = tuple[str, str]  # (cluster, pool): a pool's identity across clusters


@dataclass(frozen=True)
class TypeQuota:
    """A queue's quota on one GPU type (a per-type quota list's entry)."""

    deserved: float
    limit: float | None


@dataclass
class Queue:
    id: str  # "department:NAME" or "project:NAME"
    name: str
    kind: str  # department | project
    parent: str | None
    deserved: float
    limit: float | None
    weight: float
    priority: int
    children: list[str] = field(default_factory=list)
    # a per-GPU-type quota, by type: each type's deserved and limit hold on their own (a
    # type not listed: deserved 0, no limit); None for a quota on GPUs of any type
    typed: dict[str, TypeQuota] | None = None

    def on(self, gpu_type: str) -> TypeQuota:
        """The quota on one GPU type (only for a typed queue)."""
        return (self.typed or {}).get(gpu_type) or TypeQuota(0.0, None)


@dataclass
class PoolInfo:
    key: PoolKey  # (cluster, pool)
    gpu_type: str
    memory_gib: float
    gpus_per_node: int
    partition: str | None
    max_walltime: int | None
    cost_per_gpu_hour: float
    account: str | None
    # a gang's replicas on distinct nodes: one Slurm job asks the same GRES of every node
    one_replica_per_node: bool = False


@dataclass
class NodeInfo:
    name: str
    cluster: str
    pool: PoolKey | None
    capacity: int
    used: int  # GPUs held by every job on it, ours and others'
    schedulable: bool

    @property
    def free(self) -> int:
        return max(0, self.capacity - self.used) if self.schedulable else 0


@dataclass
class JobRequest:
    """One workload as the allocator sees it."""

    key: str  # project/name
    queue: str  # project queue id
    priority: int
    preemptible: bool
    gpus: int  # per replica
    replicas: int  # wanted
    min_replicas: int
    created: datetime  # queue entry (pending) or start (running): older goes first
    pools: list[PoolKey]  # eligible (cluster, pool), sorted
    walltime: int | None
    # current state on a cluster, if it has an active job
    job_id: str | None = None
    cluster: str | None = None
    pool: PoolKey | None = None
    placed: list[str] = field(default_factory=list)  # node of each running replica
    started_at: datetime | None = None
    # the project's minRuntime (seconds): a preemptible job younger than this is no victim
    min_runtime: int | None = None
    blocked: Reason | None = None  # set when it can never be placed this round
    fan_out: bool = False  # strategy.fanOut: the cluster's scheduler chooses among candidates

    @property
    def running(self) -> bool:
        return self.job_id is not None


@dataclass
class Problem:
    now: datetime
    queues: dict[str, Queue]
    top: list[str]  # queue ids at the top of the tree
    nodes: dict[str, NodeInfo]  # keyed by "cluster/node"
    pools: dict[PoolKey, PoolInfo]
    jobs: dict[str, JobRequest]  # every workload with demand or a running job
    submitted: dict[str, Job]  # workloads whose job waits in the cluster's own queue
    completed: set[str]  # workloads whose job finished
    orphans: list[tuple[str, Job]]  # our jobs whose workload left the specs (prune)
    duplicates: list[tuple[str, Job]]  # extra active jobs of one workload
    order: dict[str, int]  # queue creation order (name order)
    # fan-out workloads none of whose jobs runs: set aside from KAI's allocation
    fan_out: dict[str, JobRequest] = field(default_factory=dict)
    # the jobs a waiting fan-out workload has in the clusters' queues, by job id
    candidates: dict[str, list[tuple[str, Job]]] = field(default_factory=dict)
    # where every workload that runs in checkpoint segments stands
    segments: dict[str, Segments] = field(default_factory=dict)

    @property
    def typed(self) -> bool:
        """Whether any queue's quota is per GPU type."""
        return any(q.typed is not None for q in self.queues.values())

    @property
    def total_gpus(self) -> int:
        return sum(n.capacity for n in self.nodes.values() if n.schedulable)


def node_key(cluster: str, node: str) -> str:
    return f"{cluster}/{node}"


@dataclass(frozen=True)
class SpecPart:
    """What a problem takes from the specs alone: the queue tree, the pools, and each
    workload's request before the snapshot says where it stands (``created`` unset)."""

    queues: dict[str, Queue]
    top: list[str]
    pools: dict[PoolKey, PoolInfo]
    requests: dict[str, JobRequest]
    desired: DesiredState  # what it was built from


class ProblemCache:
    """The spec part of problems, kept by the specs' digest (the last few), so the rounds of
    one plan and the plans of one process (``cp watch``) build it once per spec change;
    after a change that leaves clusters, departments and projects alone, only the
    workloads that changed are built again (comparing specs costs a tenth of building).

    Only for specs whose digest is a content hash (the loader's); the cache trusts it."""

    def __init__(self, size: int = 2) -> None:
        self.size = size
        self._parts: dict[str, SpecPart] = {}

    def spec_part(self, desired: DesiredState) -> SpecPart:
        part = self._parts.get(desired.digest)
        if part is None:
            part = spec_part(desired, self._same_org(desired))
            self._parts[desired.digest] = part
            while len(self._parts) > self.size:
                del self._parts[next(iter(self._parts))]
        return part

    def _same_org(self, desired: DesiredState) -> SpecPart | None:
        for part in reversed(self._parts.values()):
            old = part.desired
            if (
                old.clusters == desired.clusters
                and old.departments == desired.departments
                and old.projects == desired.projects
            ):
                return part
        return None


def spec_part(desired: DesiredState, previous: SpecPart | None = None) -> SpecPart:
    """The spec part of ``desired``; ``previous``, built from specs with the same clusters,
    departments and projects, lends its queues, pools and the requests of unchanged
    workloads."""
    if previous is not None:
        queues, top, pools = previous.queues, previous.top, previous.pools
        old = previous.desired.workloads
    else:
        queues, top = _queues(desired)
        pools = _pools(desired)
        old = {}
    epoch = datetime.min  # set from the snapshot when a problem is built
    requests = {}
    for key, wl in sorted(desired.workloads.items()):
        if previous is not None and old.get(key) == wl:
            requests[key] = previous.requests[key]
        else:
            requests[key] = job_request(key, wl, desired, pools, epoch)
    return SpecPart(queues, top, pools, requests, desired)


def build_problem(
    desired: DesiredState,
    observed: Snapshot,
    now: datetime,
    cache: ProblemCache | None = None,
) -> Problem:
    """The problem of ``desired`` against ``observed`` at ``now``. With a ``cache``, the
    spec part is reused while the specs' digest is the same."""
    part = cache.spec_part(desired) if cache is not None else spec_part(desired)
    queues, top, pools = part.queues, part.top, part.pools
    nodes = _nodes(observed, pools)
    since = {q.workload: q.since for q in observed.queue}
    progress = {p.workload: p for p in observed.progress}
    by_workload = _jobs_by_workload(observed)
    jobs: dict[str, JobRequest] = {}
    submitted: dict[str, Job] = {}
    completed: set[str] = set()
    duplicates: list[tuple[str, Job]] = []
    candidates: dict[str, list[tuple[str, Job]]] = {}
    fan_out: dict[str, JobRequest] = {}
    segments: dict[str, Segments] = {}
    for key, template in part.requests.items():
        req = _clone(template)  # solvers set where it runs, and site policy may block it
        req.placed = []
        req.created = since.get(key, now)
        wl = desired.workloads[key]
        seen = by_workload.get(key, [])
        seg = (
            segments_of(wl.spec, progress.get(key) or progress_from_jobs(key, (j for _, j in seen)))
            if wl.spec.checkpoint is not None
            else None
        )
        if seg is not None:
            segments[key] = seg
        active = [(c, j) for c, j in seen if j.state.active]
        running = [(c, j) for c, j in active if j.state.holds_gpus]
        if running:
            # several fan-out candidates may start at once: the earliest keeps running
            cluster, job = min(
                running, key=lambda cj: (cj[1].started_at or now, job_id_order(cj[1].id))
            )
            req.job_id, req.cluster = job.id, cluster
            req.placed = [
                node_key(cluster, r.node)
                for r in job.replicas
                if r.node
                for _ in range(_sharing(r.gpus, req))
            ]
            req.pool = _pool_of(job, cluster, nodes)
            req.started_at = job.started_at
            req.created = job.submitted_at or job.started_at or req.created
            duplicates += [(c, j) for c, j in active if j is not job]
            jobs[key] = req
        elif active:
            active.sort(key=lambda cj: job_id_order(cj[1].id))
            submitted[key] = active[0][1]
            if req.fan_out:  # candidates racing to start: none is a duplicate yet
                candidates[key] = active
                fan_out[key] = req
            else:
                duplicates += active[1:]
        elif (
            seg.complete if seg is not None else any(j.state == JobState.COMPLETED for _, j in seen)
        ):
            completed.add(key)
        else:  # never ran, failed, or a segmented workload between segments
            jobs[key] = req
    orphans = [
        (c.name, j)
        for c in observed.clusters
        for j in c.jobs
        if j.workload is not None and j.state.active and j.workload not in desired.workloads
    ]
    order = {qid: i for i, qid in enumerate(sorted(queues))}
    return Problem(
        now,
        queues,
        top,
        nodes,
        pools,
        jobs,
        submitted,
        completed,
        orphans,
        duplicates,
        order,
        fan_out,
        candidates,
        segments,
    )


def _clone(template: JobRequest) -> JobRequest:
    """A shallow copy (``copy.copy`` goes through pickling's protocol: 5x slower)."""
    req = JobRequest.__new__(JobRequest)
    req.__dict__.update(template.__dict__)
    return req


def _jobs_by_workload(observed: Snapshot) -> dict[str, list[tuple[str, Job]]]:
    """Every (cluster, job) per workload identity, in snapshot order (``Snapshot.jobs_of``
    for all workloads at once: one pass, not one per workload)."""
    out: dict[str, list[tuple[str, Job]]] = {}
    for c in observed.clusters:
        for j in c.jobs:
            if j.workload is not None:
                out.setdefault(j.workload, []).append((c.name, j))
    return out


def _sharing(gpus: int, req: JobRequest) -> int:
    """Replicas one observed replica stands for: a cluster reports a job per node, and a
    fan-out candidate of the single-node shape runs all its replicas on one node."""
    if req.fan_out and req.gpus > 0 and gpus > req.gpus and gpus % req.gpus == 0:
        return gpus // req.gpus
    return 1


def set_aside_fan_out(problem: Problem) -> None:
    """Take the fan-out workloads that wait for a start out of KAI's allocation.

    Called after the site-policy checks have marked what may not start (budgets, retry
    backoff), so a set-aside workload keeps its ``blocked`` reason."""
    for key in [k for k, j in problem.jobs.items() if j.fan_out and not j.running]:
        problem.fan_out[key] = problem.jobs.pop(key)


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


def _pools(desired: DesiredState) -> dict[PoolKey, PoolInfo]:
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
                max_walltime=pool.max_walltime,
                cost_per_gpu_hour=gt.cost_per_gpu_hour if gt else 0.0,
                account=account,
                one_replica_per_node=cluster.spec.adapter == "slurm",
            )
    return out


def _nodes(observed: Snapshot, pools: dict[PoolKey, PoolInfo]) -> dict[str, NodeInfo]:
    nodes: dict[str, NodeInfo] = {}
    for c in observed.clusters:
        for n in c.nodes:
            pool = (c.name, n.pool) if n.pool and (c.name, n.pool) in pools else None
            nodes[node_key(c.name, n.name)] = NodeInfo(
                name=n.name,
                cluster=c.name,
                pool=pool,
                capacity=n.gpus,
                used=0,
                schedulable=n.schedulable,
            )
        for j in c.jobs:
            if not j.state.holds_gpus:
                continue
            for r in j.replicas:
                if r.node and node_key(c.name, r.node) in nodes:
                    nodes[node_key(c.name, r.node)].used += r.gpus
    return nodes


def _pool_of(job: Job, cluster: str, nodes: dict[str, NodeInfo]) -> PoolKey | None:
    if job.pool:
        return (cluster, job.pool)
    for r in job.replicas:
        n = nodes.get(node_key(cluster, r.node)) if r.node else None
        if n and n.pool:
            return n.pool
    return None


def eligible_pools(
    wl: Workload, desired: DesiredState, pools: dict[PoolKey, PoolInfo]
) -> list[PoolKey]:
    """Pools whose name, GPU type, memory, cluster, node size and walltime suit the workload."""
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
        if (
            pool.max_walltime is not None
            and spec.walltime is not None
            and spec.walltime > pool.max_walltime
        ):
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
    if limit is not None and spec.walltime is not None and spec.walltime > limit:
        req.blocked = reasons.walltime_exceeds(spec.walltime, spec.project, limit)
    elif not req.pools:
        req.blocked = reasons.no_eligible_pool(spec.gpus)
    return req
