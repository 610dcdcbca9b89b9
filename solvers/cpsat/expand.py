"""From counts back to nodes: which node takes which pattern, which job takes which slot.

Deterministic and within the rules the counts already satisfy: inside a pool, nodes are
taken fewest free GPUs first, then by name, and the fuller patterns go to the first
nodes; slots of one size are handed out in that node order to gangs in KAI job order
(higher priority, older, name), each gang on consecutive slots so it stays together; then
elastic replicas one per job in turn, then growth of running jobs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from solvers import reasons
from solvers.cpsat.classes import Aggregate, Base
from solvers.order import job_order
from solvers.problem import JobRequest, PoolKey, Problem
from solvers.session import Grant


@dataclass(frozen=True)
class Counts:
    """The solved values of the model's variables, as plain integers."""

    start: dict[tuple[int, PoolKey], int]
    extra: dict[tuple[int, PoolKey], int]
    grow: dict[int, int]
    nodes: dict[tuple[int, int], int]


def expand(
    problem: Problem, agg: Aggregate, counts: Counts, free: dict[str, int]
) -> dict[str, tuple[PoolKey, list[str]]]:
    """Workload -> (pool, node key of every new replica)."""
    placed: dict[str, tuple[PoolKey, list[str]]] = {}
    for pool in sorted(agg.sizes):
        slots = _slots(agg, counts, pool, free)
        for size in agg.sizes[pool]:
            _fill(problem, agg, counts, pool, size, slots.get(size, []), placed)
    _place_zero_gpu(problem, agg, free, placed)
    return placed


def _slots(
    agg: Aggregate, counts: Counts, pool: PoolKey, free: dict[str, int]
) -> dict[int, list[str]]:
    """Replica slots per size, in node order (fewest free, then name)."""
    pattern_of: dict[str, tuple[int, ...]] = {}
    for ci, c in enumerate(agg.classes):
        if c.pool != pool:
            continue
        patterns = agg.patterns[ci]
        order = sorted(range(len(patterns)), key=lambda k: (-sum(patterns[k]), patterns[k]))
        nodes = iter(c.nodes)
        for k in order:
            for _ in range(counts.nodes.get((ci, k), 0)):
                pattern_of[next(nodes)] = patterns[k]
    slots: dict[int, list[str]] = defaultdict(list)
    for node in sorted(pattern_of, key=lambda n: (free[n], n)):
        for size in pattern_of[node]:
            slots[size].append(node)
    return slots


def _fill(
    problem: Problem,
    agg: Aggregate,
    counts: Counts,
    pool: PoolKey,
    size: int,
    slots: list[str],
    placed: dict[str, tuple[PoolKey, list[str]]],
) -> None:
    free_slots = iter(slots)
    gangs: list[tuple[JobRequest, int]] = []  # (job, group index)
    for gi, g in enumerate(agg.groups):
        if g.gpus != size or pool not in g.pools or not counts.start.get((gi, pool)):
            continue
        skip = sum(counts.start.get((gi, p), 0) for p in g.pools if p < pool)
        for key in g.jobs[skip : skip + counts.start[gi, pool]]:
            gangs.append((problem.jobs[key], gi))
    gangs.sort(key=lambda jg: job_order(jg[0]))
    for job, gi in gangs:
        placed[job.key] = (pool, [next(free_slots) for _ in range(agg.groups[gi].gang)])
    # elastic replicas: one per job in turn, in job order
    started: dict[int, list[JobRequest]] = defaultdict(list)
    for job, gi in gangs:
        started[gi].append(job)
    for gi, jobs in started.items():
        extras = counts.extra.get((gi, pool), 0)
        if extras:
            each = agg.groups[gi].extra
            _round_robin([(job, each) for job in jobs], extras, free_slots, placed, pool)
    for hi, h in enumerate(agg.growths):
        if h.pool == pool and h.gpus == size:
            running = [problem.jobs[k] for k in h.jobs]
            members = [(job, job.replicas - len(job.placed)) for job in running]
            _round_robin(members, counts.grow.get(hi, 0), free_slots, placed, pool)


def _round_robin(
    members: list[tuple[JobRequest, int]],
    count: int,
    free_slots: Iterator[str],
    placed: dict[str, tuple[PoolKey, list[str]]],
    pool: PoolKey,
) -> None:
    """``count`` replicas, one per job in turn, each job at most its own room."""
    taken: dict[str, int] = defaultdict(int)
    while count > 0:
        progress = False
        for job, room in members:
            if count > 0 and taken[job.key] < room:
                placed.setdefault(job.key, (pool, []))[1].append(next(free_slots))
                taken[job.key] += 1
                count -= 1
                progress = True
        if not progress:
            raise ValueError(f"{count} replicas in {pool} have no job to go to")


def _place_zero_gpu(
    problem: Problem,
    agg: Aggregate,
    free: dict[str, int],
    placed: dict[str, tuple[PoolKey, list[str]]],
) -> None:
    """Jobs asking for no GPUs go where the greedy would put them: the fullest node that
    is not over-committed."""
    for key in agg.zero_gpu:
        job = problem.jobs[key]
        candidates = [
            (free[n], n, p)
            for p in job.pools
            for n in free
            if problem.nodes[n].pool == p and free[n] >= 0
        ]
        if candidates:
            _, node, pool = min(candidates)
            placed[key] = (pool, [node] * job.min_replicas)


def grants(
    problem: Problem,
    base: Base,
    fair: Mapping[str, float],
    placed: dict[str, tuple[PoolKey, list[str]]],
) -> dict[str, Grant]:
    """Grants with reasons, in job order: what each project holds with each new workload."""
    out: dict[str, Grant] = {}
    held: dict[str, int] = defaultdict(int)
    held_np: dict[str, int] = defaultdict(int)
    for key in sorted(placed, key=lambda k: job_order(problem.jobs[k])):
        pool, nodes = placed[key]
        job = problem.jobs[key]
        if not nodes and job.gpus > 0:
            continue
        q = problem.queues[job.queue]
        held[q.id] += len(nodes) * job.gpus
        if not job.preemptible:
            held_np[q.id] += len(nodes) * job.gpus
        grows = (len(job.placed) + len(nodes), job.replicas) if job.running else None
        reason = reasons.granted(
            q,
            base.alloc.get(q.id, 0) + held[q.id],
            fair.get(q.id, 0),
            grows=grows,
            held_np=None if job.preemptible else base.alloc_np.get(q.id, 0) + held_np[q.id],
            cpu_only=job.gpus == 0,
            whole=not job.elastic,
        )
        out[key] = Grant(key=key, nodes=tuple(job.placed) + tuple(nodes), pool=pool, reason=reason)
    return out
