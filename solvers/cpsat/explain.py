"""Why a workload still waits, read off the solved model.

For each pending job the hard constraints are checked against the solution, in the order
a user can act on them: a queue limit with no room left for this job (the binding
``limit[q]`` row), non-preemptible work already filling a deserved quota
(``np_within_deserved[q]``), then capacity in its eligible pools after the placements.
A job that would still fit was left out for higher-ranked work.
"""

from __future__ import annotations

from collections import defaultdict

from solvers import reasons
from solvers.cpsat.classes import Base, chain
from solvers.problem import JobRequest, PoolKey, Problem
from specs.actions import Reason


def pending_reasons(
    problem: Problem,
    base: Base,
    limit_room: dict[str, int],
    np_room: dict[str, int],
    placed: dict[str, tuple[PoolKey, list[str]]],
) -> dict[str, Reason]:
    new: dict[str, int] = defaultdict(int)
    new_np: dict[str, int] = defaultdict(int)
    free = dict(base.free)
    for key, (_, nodes) in placed.items():
        job = problem.jobs[key]
        for qid in chain(problem, job.queue):
            new[qid] += len(nodes) * job.gpus
            if not job.preemptible:
                new_np[qid] += len(nodes) * job.gpus
        for n in nodes:
            free[n] -= job.gpus
    blocks: dict[PoolKey, list[int]] = defaultdict(list)  # free GPUs per node, per pool
    for n, f in free.items():
        pool = problem.nodes[n].pool
        if pool is not None and f > 0 and problem.nodes[n].closes_in is None:  # as the model
            blocks[pool].append(f)
    out: dict[str, Reason] = {}
    capacity: dict[tuple[object, ...], Reason] = {}  # jobs of one shape share the answer
    for key, job in sorted(problem.jobs.items()):
        if job.running or (key in placed and (placed[key][1] or job.gpus == 0)):
            continue
        if job.blocked is not None:
            out[key] = job.blocked
            continue
        need = job.min_replicas * job.gpus
        shape = (tuple(job.pools), job.gpus, job.min_replicas)
        if shape not in capacity:
            capacity[shape] = _no_capacity(job, blocks, problem.out_of_service(job.pools))
        forever = (
            None
            if job.preemptible
            else reasons.beyond_deserved(
                (problem.queues[q] for q in chain(problem, job.queue)), need
            )
        )
        if forever is not None:
            held = base.alloc_np.get(forever.id, 0) + new_np[forever.id]
            out[key] = reasons.non_preemptible_over_deserved(forever, held, need)
            continue
        out[key] = (
            _over_limit(problem, base, job, need, new, limit_room)
            or _np_over_deserved(problem, base, job, need, new_np, np_room)
            or capacity[shape]
        )
    return out


def _over_limit(
    problem: Problem,
    base: Base,
    job: JobRequest,
    need: int,
    new: dict[str, int],
    limit_room: dict[str, int],
) -> Reason | None:
    for qid in chain(problem, job.queue):
        if qid in limit_room and new[qid] + need > limit_room[qid]:
            held = base.alloc.get(qid, 0) + new[qid]
            return reasons.over_limit(problem.queues[qid], held, need)
    return None


def _np_over_deserved(
    problem: Problem,
    base: Base,
    job: JobRequest,
    need: int,
    new_np: dict[str, int],
    np_room: dict[str, int],
) -> Reason | None:
    if job.preemptible:
        return None
    for qid in chain(problem, job.queue):
        if new_np[qid] + need > np_room[qid]:
            held = base.alloc_np.get(qid, 0) + new_np[qid]
            return reasons.non_preemptible_over_deserved(problem.queues[qid], held, need)
    return None


def _no_capacity(
    job: JobRequest, blocks: dict[PoolKey, list[int]], down: tuple[int, int]
) -> Reason:
    total = largest = 0
    fits = False
    for pool in job.pools:
        free = blocks.get(pool, [])
        total += sum(free)
        largest = max([largest, *free])
        fits = fits or _gang_fits(free, job.gpus, job.min_replicas)
    if fits:
        return reasons.ranked_lower(job.min_replicas, job.gpus, job.pools)
    return reasons.no_room(
        job.min_replicas,
        job.gpus,
        job.pools,
        total,
        largest,
        gang_would_fit_in_total=total >= job.min_replicas * job.gpus,
        down=down,
    )


def _gang_fits(blocks: list[int], gpus: int, replicas: int) -> bool:
    """Whether ``replicas`` of ``gpus`` fit in the free blocks (several may share a node)."""
    return gpus == 0 or sum(b // gpus for b in blocks) >= replicas
