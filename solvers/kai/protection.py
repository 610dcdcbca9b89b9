"""Why a job waits when only ``minRuntime``, or work winding down, stands in its way.

Reclaim and preemption never take work that started less than its project's
``minRuntime`` ago. A job that finds no room for that reason alone should say so, name
the projects whose protection it waits for and when the first protection ends, instead
of reporting "no capacity". The test is GPUs, not placements: the free GPUs of its pools
plus those held there by protected work it could otherwise take (reclaim's or
preemption's rules) must cover what it asks for.

Work on its way out (evicted and saving its checkpoint, cancelled in its grace) holds its
GPUs until it ends: a job that would fit once it has ended says so, naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from solvers import reasons
from solvers.kai.allocate import next_chunk
from solvers.kai.candidates import protected
from solvers.kai.disruption import Ledger
from solvers.kai.preempt import Preempt
from solvers.kai.reclaim import Reclaim
from solvers.problem import JobRequest, PoolKey
from solvers.session import Session
from specs.actions import Reason


@dataclass
class Group:
    """Protected running work of one queue and priority in one pool: all the reclaim and
    preemption rules look at, so one job stands for the group."""

    victim: JobRequest
    gpus: int  # held in the pool
    first_end: datetime  # when the first of it may be taken


@dataclass
class Protected:
    """Every pool's protected work, grouped, and the answers given so far: waiting jobs of
    one shape (project, priority, GPUs, pools, nothing held yet) get the same answer."""

    groups: dict[PoolKey, list[Group]]
    answers: dict[tuple[object, ...], Reason | None] = field(default_factory=dict)
    # work winding down: node -> (job key, GPUs it holds there)
    leaving: dict[str, list[tuple[str, int]]] = field(default_factory=dict)


def protected_work(session: Session) -> Protected:
    """Every pool's protected work, grouped: built once per cycle, so each waiting job
    looks at a few groups instead of every running job."""
    s = session
    groups: dict[tuple[PoolKey, str, int], Group] = {}
    leaving: dict[str, list[tuple[str, int]]] = {}
    for key, nodes in s.tasks.items():
        victim = s.problem.jobs[key]
        if victim.ending:
            for n in nodes:
                leaving.setdefault(n, []).append((key, victim.gpus))
        if not nodes or not victim.preemptible or victim.ending or not protected(s, victim):
            continue  # (work winding down is leaving, not kept)
        assert victim.started_at is not None and victim.min_runtime is not None
        ends = victim.started_at + timedelta(seconds=victim.min_runtime)
        for n in nodes:
            pool = s.index.pool_of.get(n)
            if pool is None:
                continue
            group = groups.setdefault((pool, victim.queue, victim.priority), Group(victim, 0, ends))
            group.gpus += victim.gpus
            group.first_end = min(group.first_end, ends)
    out: dict[PoolKey, list[Group]] = {}
    for (pool, _, _), group in sorted(groups.items(), key=lambda g: g[0]):
        out.setdefault(pool, []).append(group)
    return Protected(out, leaving=leaving)


def leaving_wait(session: Session, job: JobRequest, reason: Reason, known: Protected) -> Reason:
    """``reason`` (no room), saying which work winding down holds the GPUs ``job`` would
    start on once it has ended; as it is where that work is not why."""
    if not known.leaving:
        return reason
    s, pools = session, tuple(session.pools_for(job))
    count = next_chunk(job, len(s.tasks.get(job.key, [])))
    shape = ("leaving", pools, job.gpus, count, reason)  # one look per shape, not per job
    if shape not in known.answers:
        known.answers[shape] = _leaving(s, job, count, set(pools), reason, known)
    return known.answers[shape] or reason


def _leaving(
    s: Session, job: JobRequest, count: int, pools: set[PoolKey], reason: Reason, known: Protected
) -> Reason | None:
    fits, held, who = 0, 0, {}
    for node, free in s.index.free.items():
        if s.index.pool_of.get(node) not in pools:
            continue
        gone = sum(g for _, g in known.leaving.get(node, []))
        # an over-committed node the leaving work does not bring below its GPUs fits none
        fits += max(0, free + gone) // job.gpus if job.gpus else count
        if gone:
            held += gone
            who.update(dict.fromkeys(k for k, _ in known.leaving[node]))
    if not held or fits < count:
        return None
    jobs = s.problem.jobs
    return reasons.leaving_wait(reason, held, [(jobs[k].job_id, k) for k in who])


def protection_wait(
    session: Session,
    job: JobRequest,
    protected_by: Protected | None = None,
    at_limit: bool = False,
) -> Reason | None:
    """The ``min-runtime`` reason for ``job``, or None when protection is not what holds it
    back (nothing protected it could take, or not enough even with it). ``protected_by``:
    :func:`protected_work`, when the caller asks for many jobs. ``at_limit``: the job
    waits on a limit, which only its own project's work it may preempt can make room
    under (reclaim takes from other projects)."""
    s = session
    known = protected_work(s) if protected_by is None else protected_by
    count = next_chunk(job, len(s.tasks.get(job.key, [])))
    if s.tasks.get(job.key):  # it could be a victim of its own twins: no shared answer
        return _wait(s, job, count, known.groups, at_limit)
    shape = (
        job.queue,
        job.priority,
        job.preemptible,
        job.gpus,
        count,
        tuple(s.pools_for(job)),
        at_limit,
    )
    if shape not in known.answers:
        known.answers[shape] = _wait(s, job, count, known.groups, at_limit)
    return known.answers[shape]


def _wait(
    s: Session, job: JobRequest, count: int, work: dict[PoolKey, list[Group]], at_limit: bool
) -> Reason | None:
    pools = set(s.pools_for(job))
    if not any(p in work for p in pools):
        return None
    need = count * job.gpus
    rules = [Preempt(s, Ledger())] if at_limit else [Reclaim(s, Ledger()), Preempt(s, Ledger())]
    for rule in rules:
        rule.count = count
    open_rules = [r for r in rules if r.admits(job, count)]
    if not open_rules:
        return None
    held = 0
    until: dict[str, tuple[int, datetime]] = {}  # project -> (minRuntime, first end)
    for pool in sorted(pools & work.keys()):
        for g in work[pool]:
            if g.victim.key == job.key or not any(r.may_evict(job, g.victim) for r in open_rules):
                continue
            held += g.gpus
            project = s.problem.queues[g.victim.queue].name
            first = until.get(project)
            if first is None or g.first_end < first[1]:
                until[project] = (g.victim.min_runtime or 0, g.first_end)
    free = sum(s.index.pool_free(p)[0] for p in pools)
    if not held or free + held < need:
        return None
    if at_limit and any(
        q.limit is not None and s.alloc[q.id] - held + need > q.limit for q in s.chain(job.queue)
    ):
        return None  # even with all of it gone, a limit would still hold it back
    return reasons.min_runtime_wait(need, sorted(until.items()))
