"""The solver's plain records: queues, pools, nodes, one request per workload, the problem."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from solvers.segments import Segments
from specs.actions import Reason
from specs.snapshot import Failure, Job, Refusal, Reservation

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
    max_walltime: int | None  # the shorter of the specs' and the cluster's
    cost_per_gpu_hour: float
    account: str | None
    # a gang's replicas on distinct nodes: one Slurm job asks the same GRES of every node
    one_replica_per_node: bool = False
    # a resize is a new job (Slurm): growing restarts every replica
    resize_restarts: bool = False
    cluster_max_walltime: int | None = None  # what the cluster itself sets (Slurm's MaxTime)


@dataclass
class NodeInfo:
    name: str
    cluster: str
    pool: PoolKey | None
    capacity: int
    used: int  # GPUs held by every job on it, ours and others'
    schedulable: bool
    leaving: int = 0  # of ``used``, held by jobs winding down (preempted, cancelled)
    # the node's next reservation (an announced maintenance) and the seconds until it
    # begins: no job of ours that would run into it starts here (one under way: none)
    window: Reservation | None = None
    closes_in: float | None = None

    def runs_into(self, limit: int | None) -> bool:
        """Whether a job started here now with time limit ``limit`` (seconds; None: none)
        would run into the node's next reservation."""
        return self.closes_in is not None and (limit is None or limit > self.closes_in)

    @property
    def free(self) -> int:
        """GPUs not held; below 0 on an over-committed node (its jobs hold more GPUs than
        it reports: one fell off the bus under them), so that taking its jobs away frees
        only what they hold beyond the deficit, not all they hold."""
        return self.capacity - self.used if self.schedulable else 0


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
    max_walltime: int | None = None  # the project's maxWalltime (seconds)
    blocked: Reason | None = None  # set when it can never be placed this round
    # the failure a start would retry (its backoff over): named in the start's reason
    retries: Failure | None = None
    fan_out: bool = False  # strategy.fanOut: the cluster's scheduler chooses among candidates
    ending: bool = False  # its job winds down (COMPLETING): never grown back, never moved
    ending_why: str | None = None  # and the cluster's word for why, if it gave one
    # applies failed to act on its job, and their backoff lasts until refused_until: no
    # victim, and not replaced for an edit (sitepolicy/refusals.py)
    refused: Refusal | None = None
    refused_until: datetime | None = None

    def time_limit(self, pool: PoolInfo) -> int | None:
        """The time limit its job is submitted with in ``pool``: its walltime; without one,
        the limit it runs under all the same (the shorter of its project's maxWalltime and
        the pool's), as Slurm gives a job that asks none its partition's limit capped by
        its association's. Unbounded only where nothing sets a limit."""
        if self.walltime is not None:
            return self.walltime
        limits = (self.max_walltime, pool.max_walltime)
        return min((t for t in limits if t is not None), default=None)

    def not_grown(self) -> None:
        """Ask for no more replicas than it runs (at least its minimum): growing it would
        start new work, or restart it where a resize is a new job."""
        self.replicas = max(len(self.placed), self.min_replicas)

    @property
    def running(self) -> bool:
        return self.job_id is not None

    @property
    def evictable(self) -> bool:
        """A victim a disruptive step may take: preemptible, not on its way out already,
        and not a job whose eviction failed lately (it would only fail again)."""
        return self.preemptible and not self.ending and self.refused is None

    @property
    def elastic(self) -> bool:
        """It may run with fewer replicas than it asks for (minReplicas < replicas)."""
        return self.min_replicas < self.replicas


@dataclass(frozen=True)
class Queued:
    """A workload whose job waits in a cluster's queue: the job, its request, and the
    pool it waits in (None: not one of the specs' pools)."""

    cluster: str
    job: Job
    request: JobRequest
    pool: PoolKey | None


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
    # jobs waiting in a cluster's queue for a spec edited since: cancelled, and the workload
    # planned afresh
    outdated: list[tuple[str, Job]] = field(default_factory=list)
    # jobs waiting in a cluster's queue pinned to nodes that cannot hold them now (others
    # took them): cancelled, and the workload planned again
    stranded: list[tuple[str, Job]] = field(default_factory=list)
    # jobs waiting in a cluster's queue in a pool the specs no longer have: cancelled (the
    # workload waits for its other fan-out candidates, or is planned again)
    pool_gone: list[tuple[str, Job]] = field(default_factory=list)
    # running gangs a replica of which failed while the others run: stopped (they cannot go
    # on), the workload then retried
    failing: list[tuple[str, Job]] = field(default_factory=list)
    # fan-out workloads a candidate of which ran to completion while others of its round
    # still wait or run: that winner (the others are ``duplicates``)
    won: dict[str, tuple[str, Job]] = field(default_factory=dict)
    # of ``submitted``, all but fan-out candidates: what each job asks, and where it waits
    queued: dict[str, Queued] = field(default_factory=dict)
    # other jobs of a workload whose cancel failed lately (the eviction backoff), left as
    # they are: a waiting one holds the room where it may start, as ``queued`` ones do,
    # and a running one's GPUs count against its queues, as running work's do
    kept_queued: list[Queued] = field(default_factory=list)
    kept_running: list[Queued] = field(default_factory=list)  # a Queued record all the same
    # workloads waiting in a cluster's queue for a spec edited since, left as they are for
    # that backoff: the job (cluster, id) whose cancel failed
    stale: dict[str, tuple[str, str]] = field(default_factory=dict)
    # the jobs whose cancel or eviction failed lately, by (cluster, id), while the backoff
    # after it lasts: the failure, and when it ends (solvers/sitepolicy/refusals.py)
    refused: dict[tuple[str, str], tuple[Refusal, datetime]] = field(default_factory=dict)
    # in a plan's later round (a virtual world holding the plan's own starts): the
    # workloads running when the plan began; None in its first round
    running_at_start: frozenset[str] | None = None
    # workloads held for a cluster that did not answer (controlplane/unreachable.py): each
    # runs as a non-preemptible stand-in there, counted against its quotas and limits so
    # that nothing new starts in its place, but never a reason to evict running work
    stand_ins: frozenset[str] = frozenset()
    # running elastic work site policy keeps from growing (a spent budget): why, to say so
    not_grown: dict[str, Reason] = field(default_factory=dict)
    # projects (queue ids) that spent this month's budget, and why: they start nothing new
    spent: dict[str, Reason] = field(default_factory=dict)
    # what solvers derive from the problem alone, computed once (e.g. CP-SAT's base state)
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def ran_before(self, key: str) -> bool:
        """Whether the workload was running when the plan began (a disturbed job, not one
        this plan starts)."""
        if self.running_at_start is not None:
            return key in self.running_at_start
        job = self.jobs.get(key)
        return job is not None and job.running

    @property
    def typed(self) -> bool:
        """Whether any queue's quota is per GPU type."""
        return any(q.typed is not None for q in self.queues.values())

    def out_of_service(self, pools: Iterable[PoolKey]) -> tuple[int, int]:
        """The nodes of ``pools`` that take no work now (down, drained, or in a reservation
        under way), and their GPUs."""
        down: dict[PoolKey, tuple[int, int]] | None = self.derived.get("out_of_service")
        if down is None:
            down = self.derived["out_of_service"] = {}
            for n in self.nodes.values():
                if n.pool is not None and not n.schedulable:
                    nodes, gpus = down.get(n.pool, (0, 0))
                    down[n.pool] = (nodes + 1, gpus + n.capacity)
        found = [down[p] for p in pools if p in down]
        return sum(n for n, _ in found), sum(g for _, g in found)

    @property
    def total_gpus(self) -> int:
        return sum(n.capacity for n in self.nodes.values() if n.schedulable)

    def chain(self, queue_id: str) -> list[str]:
        """The queue's id and its ancestors', leaf first (a session caches its own)."""
        out: list[str] = []
        qid: str | None = queue_id
        while qid is not None:
            out.append(qid)
            qid = self.queues[qid].parent
        return out


def node_key(cluster: str, node: str) -> str:
    return f"{cluster}/{node}"
