"""Aggregation: interchangeable nodes into classes, interchangeable jobs into groups.

One boolean per (job, node) does not scale (shared/traces/README: no good solution in 30 s
at 200 nodes / 1,000 pending). Nodes of one pool with the same capacity and the same free
GPUs are interchangeable, and so are pending jobs with the same queue, priority,
preemptibility, shape and eligible pools; the model only counts how many of each are used.

A node's *packing pattern* is the multiset of replica sizes placed on it. Counting, per
class, how many nodes take each pattern is an exact model of bin-packing onto identical
nodes, and its LP relaxation is the strong (Gilmore-Gomory) one.

Pure: derived from the :class:`~solvers.problem.Problem` alone, never from a session that
an allocator may already have mutated.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from solvers.order import job_order
from solvers.problem import JobRequest, PoolKey, Problem
from solvers.session import Session

Pattern = tuple[int, ...]  # replica sizes on one node, largest first
EPS = 1e-9


@dataclass(frozen=True)
class Base:
    """The state before the pass: GPUs held per queue (all work, non-preemptible work)."""

    alloc: dict[str, int]
    alloc_np: dict[str, int]
    free: dict[str, int]  # node key -> free GPUs, schedulable nodes of a known pool only


@dataclass(frozen=True)
class NodeClass:
    pool: PoolKey
    capacity: int
    free: int
    nodes: tuple[str, ...]  # node keys, by name

    @property
    def name(self) -> str:
        return f"{self.pool[0]}/{self.pool[1]}:cap{self.capacity}:free{self.free}"


@dataclass(frozen=True)
class JobGroup:
    """Pending jobs the model cannot tell apart; members oldest first (KAI job order)."""

    queue: str
    priority: int
    preemptible: bool
    gpus: int  # per replica
    gang: int  # replicas that must start together (minReplicas)
    extra: int  # elastic replicas each started job may add later (replicas - minReplicas)
    pools: tuple[PoolKey, ...]
    jobs: tuple[str, ...]

    @property
    def name(self) -> str:
        kind = "np" if not self.preemptible else "p"
        pools = "+".join(f"{c}/{p}" for c, p in self.pools)
        return (
            f"{self.queue}:prio{self.priority}:{kind}:{self.gang}x{self.gpus}+{self.extra}@{pools}"
        )


@dataclass(frozen=True)
class Growth:
    """Running elastic jobs of one shape that may add replicas in the pool they run in."""

    queue: str
    priority: int
    preemptible: bool
    gpus: int
    pool: PoolKey
    jobs: tuple[str, ...]  # oldest first
    room: int  # replicas they may still add, all together

    @property
    def name(self) -> str:
        return f"{self.queue}:prio{self.priority}:grow{self.gpus}@{self.pool[0]}/{self.pool[1]}"


@dataclass(frozen=True)
class Aggregate:
    classes: tuple[NodeClass, ...]
    groups: tuple[JobGroup, ...]
    growths: tuple[Growth, ...]
    patterns: dict[int, tuple[Pattern, ...]]  # class index -> its patterns (empty one first)
    sizes: dict[PoolKey, tuple[int, ...]]  # replica sizes wanted per pool
    zero_gpu: tuple[str, ...]  # pending jobs asking for no GPUs: placed outside the model


def base_state(problem: Problem) -> Base:
    """GPUs held per queue and free GPUs per node before the pass: exactly what a fresh
    session starts from (running work, and the GPUs waiting fan-out candidates hold).
    Computed once per problem (the solver and each scoring ask for it)."""
    if "cpsat.base" not in problem.derived:
        s = Session.before(problem)
        problem.derived["cpsat.base"] = Base(
            {q: int(g) for q, g in s.alloc.items()},
            {q: int(g) for q, g in s.alloc_np.items()},
            dict(s.index.free),
        )
    base: Base = problem.derived["cpsat.base"]
    return base


def chain(problem: Problem, queue_id: str) -> list[str]:
    """The queue and its ancestors, leaf first."""
    out = []
    q = problem.queues.get(queue_id)
    while q is not None:
        out.append(q.id)
        q = problem.queues.get(q.parent) if q.parent else None
    return out


def pending_jobs(problem: Problem) -> list[JobRequest]:
    """Jobs this pass may start: not running, not blocked, with an eligible pool."""
    return [j for j in problem.jobs.values() if not j.running and j.blocked is None and j.pools]


def growing_jobs(problem: Problem) -> list[JobRequest]:
    """Running elastic jobs below their replicas, in a known pool."""
    return [
        j
        for j in problem.jobs.values()
        if j.running and j.pool is not None and j.gpus > 0 and len(j.placed) < j.replicas
    ]


def floor_quota(x: float | None) -> int | None:
    """Quotas may be fractional; GPUs are whole."""
    return None if x is None else math.floor(x + EPS)


def aggregate(problem: Problem, base: Base) -> Aggregate:
    groups = _groups(problem)
    growths = _growths(problem)
    wanted: dict[PoolKey, set[int]] = defaultdict(set)
    for g in groups:
        for p in g.pools:
            wanted[p].add(g.gpus)
    for h in growths:
        wanted[h.pool].add(h.gpus)
    sizes = {p: tuple(sorted(s, reverse=True)) for p, s in sorted(wanted.items())}
    classes = _classes(problem, base, sizes)
    patterns = {i: enumerate_patterns(c.free, sizes[c.pool]) for i, c in enumerate(classes)}
    zero = tuple(sorted(j.key for j in pending_jobs(problem) if j.gpus == 0))
    return Aggregate(classes, groups, growths, patterns, sizes, zero)


def _groups(problem: Problem) -> tuple[JobGroup, ...]:
    members: dict[tuple[object, ...], list[JobRequest]] = defaultdict(list)
    key: tuple[object, ...]
    for job in pending_jobs(problem):
        if job.gpus == 0:
            continue
        key = (
            job.queue,
            job.priority,
            job.preemptible,
            job.gpus,
            job.min_replicas,
            job.replicas - job.min_replicas,
            tuple(job.pools),
        )
        members[key].append(job)
    out = []
    for _, jobs in sorted(members.items(), key=lambda kv: repr(kv[0])):
        first = jobs[0]
        out.append(
            JobGroup(
                queue=first.queue,
                priority=first.priority,
                preemptible=first.preemptible,
                gpus=first.gpus,
                gang=first.min_replicas,
                extra=first.replicas - first.min_replicas,
                pools=tuple(first.pools),
                jobs=tuple(j.key for j in sorted(jobs, key=job_order)),
            )
        )
    return tuple(out)


def _growths(problem: Problem) -> tuple[Growth, ...]:
    members: dict[tuple[object, ...], list[JobRequest]] = defaultdict(list)
    for job in growing_jobs(problem):
        assert job.pool is not None
        members[(job.queue, job.priority, job.preemptible, job.gpus, job.pool)].append(job)
    out = []
    for _, jobs in sorted(members.items(), key=lambda kv: repr(kv[0])):
        first = jobs[0]
        assert first.pool is not None
        out.append(
            Growth(
                queue=first.queue,
                priority=first.priority,
                preemptible=first.preemptible,
                gpus=first.gpus,
                pool=first.pool,
                jobs=tuple(j.key for j in sorted(jobs, key=job_order)),
                room=sum(j.replicas - len(j.placed) for j in jobs),
            )
        )
    return tuple(out)


def _classes(
    problem: Problem, base: Base, sizes: dict[PoolKey, tuple[int, ...]]
) -> tuple[NodeClass, ...]:
    """Classes of nodes that can take at least the smallest replica wanted in their pool.
    A node with a reservation ahead (a maintenance) is in none: which jobs end before it
    begins is the greedy's to decide, job by job (solvers/placement.py)."""
    members: dict[tuple[PoolKey, int, int], list[str]] = defaultdict(list)
    for key, free in base.free.items():
        node = problem.nodes[key]
        assert node.pool is not None
        wanted = sizes.get(node.pool)
        if wanted and free >= wanted[-1] and node.closes_in is None:
            members[(node.pool, node.capacity, free)].append(key)
    return tuple(
        NodeClass(pool=pool, capacity=cap, free=free, nodes=tuple(sorted(nodes)))
        for (pool, cap, free), nodes in sorted(members.items())
    )


def enumerate_patterns(free: int, sizes: tuple[int, ...]) -> tuple[Pattern, ...]:
    """Every multiset of ``sizes`` (largest first) that fits in ``free`` GPUs, empty first."""
    out: list[Pattern] = []

    def extend(prefix: Pattern, room: int, start: int) -> None:
        out.append(prefix)
        for i in range(start, len(sizes)):
            if sizes[i] <= room:
                extend((*prefix, sizes[i]), room - sizes[i], i)

    extend((), free, 0)
    return tuple(sorted(out, key=lambda p: (sum(p), p)))


def partly_used(capacity: int, free_after: int) -> int:
    """1 if the node is left neither empty nor full: its free GPUs are stranded."""
    return 1 if 0 < free_after < capacity else 0


def spread(capacity: int, free_after: int) -> int:
    """Free times used GPUs: zero on empty and full nodes, largest on half-full ones.

    For a fixed number of GPUs placed, a smaller total means free GPUs gathered on fewer
    nodes: KAI's rule of filling the node with the fewest free GPUs first.
    """
    return max(0, free_after) * max(0, capacity - free_after)
