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

from collections import defaultdict
from collections.abc import Callable, Collection
from datetime import datetime

from solvers.order import job_id_order, last_completed, round_winner
from solvers.problem.edits import edited_while_running, followed
from solvers.problem.nodes import node_table, utc
from solvers.problem.partitions import drop_missing, missing_partitions
from solvers.problem.records import (
    JobRequest,
    NodeInfo,
    PoolInfo,
    PoolKey,
    Problem,
    Queue,
    Queued,
    TypeQuota,
    node_key,
)
from solvers.problem.specpart import (
    ProblemCache,
    SpecPart,
    eligible_pools,
    job_request,
    pool_limits,
    spec_part,
    workload_pools,
)
from solvers.problem.standins import stand_in_types
from solvers.problem.stranded import stranded_on, stuck_on
from solvers.segments import Segments, progress_from_jobs, segments_of
from specs.desired import DesiredState
from specs.models import WorkloadSpec
from specs.snapshot import Job, JobState, Snapshot

__all__ = [
    "JobRequest",
    "NodeInfo",
    "PoolInfo",
    "PoolKey",
    "Problem",
    "ProblemCache",
    "Queue",
    "Queued",
    "SpecPart",
    "TypeQuota",
    "build_problem",
    "eligible_pools",
    "held_now",
    "job_request",
    "node_key",
    "set_aside_fan_out",
    "spec_part",
    "stand_in_types",
    "stuck_on",
    "workload_pools",
]


def build_problem(
    desired: DesiredState,
    observed: Snapshot,
    now: datetime,
    cache: ProblemCache | None = None,
    kept: Collection[tuple[str, str]] = (),
) -> Problem:
    """The problem of ``desired`` against ``observed`` at ``now``. With a ``cache``, the
    spec part is reused while the specs' digest is the same. ``kept``: jobs (cluster, id)
    not to cancel now, whatever for (their cancel failed lately): their GPUs stay taken, and
    a queued one stays (its workload's job, or an extra one that holds its room)."""
    limits = pool_limits(observed)
    part = (
        cache.spec_part(desired, limits) if cache is not None else spec_part(desired, limits=limits)
    )
    queues, top, pools = part.queues, part.top, part.pools
    nodes = node_table(observed, pools, utc(now))
    missing = missing_partitions(observed, pools)  # typos in the specs: no such partition
    orphans = [
        (c.name, j)
        for c in observed.clusters
        for j in c.jobs
        if j.workload is not None
        and j.state.active
        and not _ending(j)
        and j.workload not in desired.workloads
        and (c.name, j.id) not in kept
    ]
    _release(nodes, orphans)  # before any queued job is judged stranded on their nodes
    since = {q.workload: q.since for q in observed.queue}

    def hourly(cluster: str, job: Job) -> float:
        """What a running job costs an hour (its GPUs at its pool's price)."""
        pool = pools.get(_pool_of(job, cluster, nodes) or ("", ""))
        return sum(r.gpus for r in job.replicas) * (pool.cost_per_gpu_hour if pool else 0.0)

    progress = {p.workload: p for p in observed.progress}
    by_workload = _jobs_by_workload(observed)
    jobs: dict[str, JobRequest] = {}
    submitted: dict[str, Job] = {}
    completed: set[str] = set()
    done: dict[str, JobRequest] = {}  # the completed ones, by key
    duplicates: list[tuple[str, Job]] = []
    outdated: list[tuple[str, Job]] = []
    stranded: list[tuple[str, Job]] = []
    pool_gone: list[tuple[str, Job]] = []
    failing: list[tuple[str, Job]] = []
    stale: dict[str, tuple[str, str]] = {}
    queued: dict[str, Queued] = {}
    candidates: dict[str, list[tuple[str, Job]]] = {}
    won: dict[str, tuple[str, Job]] = {}
    fan_out: dict[str, JobRequest] = {}
    segments: dict[str, Segments] = {}
    created_now = utc(now)
    for key, template in part.requests.items():
        req = _clone(template)  # solvers set where it runs, and site policy may block it
        req.placed = []
        req.created = utc(queued_since) if (queued_since := since.get(key)) else created_now
        if missing:
            drop_missing(req, missing)
        wl = desired.workloads[key]
        seen = by_workload.get(key)
        if seen is None and wl.spec.checkpoint is None:
            jobs[key] = req  # never submitted (most of a busy org's waiting work): it waits
            continue
        seen = seen or []
        seg = (
            segments_of(wl.spec, progress.get(key) or progress_from_jobs(key, seen, hourly))
            if wl.spec.checkpoint is not None
            else None
        )
        if seg is not None:
            segments[key] = seg
        active = [(c, j) for c, j in seen if j.state.active]
        if req.fan_out and (rivals := _rivals_of_a_finished_winner(seen, active, hourly, now)):
            won[key], losers = rivals
            duplicates += losers  # its round is won: the rest would run it again
            active = [(c, j) for c, j in active if not any(j is lost for _, lost in losers)]
        if any(not _ending(j) for _, j in active):
            # what winds down (the old job of a move or a replacement) only holds its GPUs
            # a little longer: the workload is its other job
            active = [(c, j) for c, j in active if not _ending(j)]
        running = [(c, j) for c, j in active if j.state.holds_gpus]
        # a queued job whose cancel failed lately stays as it is (its workload's job, or an
        # extra one held as it is); the rest go as they would
        left = [cj for cj in active if (cj[0], cj[1].id) in kept]
        if left and not running:
            rest = [cj for cj in active if not any(cj is k for k in left)]
            if _outdated(active, wl.spec.digest):  # said in its wait
                stale[key] = (left[0][0], left[0][1].id)
                outdated += rest
            elif stranded_on(active, nodes):
                stranded += rest
            else:  # the rest in pools that stay are its jobs as before (one, and extra ones)
                rest = [cj for cj in rest if _pool_removed(*cj, pools)]
                pool_gone += rest
            active = [cj for cj in active if not any(cj is r for r in rest)]
        if (
            not running
            and not left
            and (gone := [cj for cj in active if _pool_removed(*cj, pools)])
        ):
            pool_gone += gone  # not what the specs ask for any more
            active = [cj for cj in active if not any(cj is g for g in gone)]
        if running:
            cluster, job = _kept(running, req.fan_out, wl.spec.digest, now, hourly)
            req.job_id, req.cluster = job.id, cluster
            req.placed = [
                node_key(cluster, r.node)
                for r in job.replicas
                if r.node
                for _ in range(_sharing(r.gpus, req))
            ]
            req.pool = _pool_of(job, cluster, nodes)
            if job.state is JobState.COMPLETING and req.placed:  # winding down: not grown back
                req.replicas = req.min_replicas = len(req.placed)
                req.ending, req.ending_why = True, job.reason
                if job.failed_replicas and (cluster, job.id) not in kept:  # only this plan ends it
                    failing.append((cluster, job))
            req.started_at = utc(job.started_at) if job.started_at else None
            if _restarts_within_min_runtime(req, pools, now):  # growing would restart it
                req.not_grown()
            req.created = utc(job.submitted_at or job.started_at or req.created)
            duplicates += [(c, j) for c, j in active if j is not job and not _ending(j)]
            jobs[key] = req
        elif active and not left and _outdated(active, wl.spec.digest):
            outdated += active  # nothing runs yet: the new version takes their place
            jobs[key] = req
        elif active and not left and stranded_on(active, nodes):
            stranded += active  # nothing will make room there: placed again
            jobs[key] = req
        elif active:
            active.sort(key=lambda cj: job_id_order(cj[1].id))
            submitted[key] = active[0][1]
            if req.fan_out:  # candidates racing to start: none is a duplicate yet
                candidates[key] = active
                fan_out[key] = req
            else:
                cluster, job = active[0]
                pool = _pool_of(job, cluster, nodes)
                queued[key] = Queued(cluster, job, req, pool if pool in pools else None)
                duplicates += [(c, j) for c, j in active[1:] if not _ending(j)]
        elif seg.complete if seg is not None else _done(req, wl.spec, seen, observed, nodes):
            completed.add(key)
            done[key] = req  # a loser of its round left running still counts
        else:  # never ran, failed, or a segmented workload between segments
            jobs[key] = req
    held = [(c, j) for c, j in duplicates if (c, j.id) in kept]  # left as they are
    duplicates = [(c, j) for c, j in duplicates if (c, j.id) not in kept]
    _release(nodes, duplicates)
    order = {qid: i for i, qid in enumerate(sorted(queues))}
    requests = {k: q.request for k, q in queued.items()} | jobs | done
    alone = _left_alone(held, requests, nodes, pools)
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
        outdated,
        stranded=stranded,
        pool_gone=pool_gone,
        failing=failing,
        queued=queued,
        won=won,
        stale=stale,
        kept_queued=[q for q in alone if not q.job.state.holds_gpus],
        kept_running=[q for q in alone if q.job.state.holds_gpus],
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


def _kept(
    running: list[tuple[str, Job]],
    fan_out: bool,
    digest: str,
    now: datetime,
    cost: Callable[[str, Job], float],
) -> tuple[str, Job]:
    """The job a workload with several running keeps. Fan-out candidates may start at
    once: the winner of their round (:func:`~solvers.order.round_winner`: the earliest
    started, and of those started together the cheaper to run). Any other workload runs two
    only when an apply stopped between a replacement's submit and its cancel (a resize or
    a move on Slurm, an edit): the replacement, the one of the current spec and else the
    newer."""
    if fan_out:
        return round_winner(running, lambda cj: (cj[1].started_at or now, cost(*cj), cj[1].id))
    return max(
        running,
        key=lambda cj: (
            cj[1].spec_digest == digest,
            cj[1].submitted_at or cj[1].started_at or now,
            job_id_order(cj[1].id),
        ),
    )


def _left_alone(
    held: list[tuple[str, Job]],
    requests: dict[str, JobRequest],
    nodes: dict[str, NodeInfo],
    pools: dict[PoolKey, PoolInfo],
) -> list[Queued]:
    """The extra jobs a refused cancel leaves (the eviction backoff), running or waiting."""
    return [
        Queued(c, j, requests[j.workload or ""], pool if pool in pools else None)
        for c, j in held
        if (j.workload or "") in requests
        for pool in [_pool_of(j, c, nodes)]
    ]


def _release(nodes: dict[str, NodeInfo], cancelled: list[tuple[str, Job]]) -> None:
    """The GPUs of jobs this plan cancels (pruned, extra) are free for its placements:
    held until a later round, they made the first one reclaim for room that was coming."""
    for cluster, job in cancelled:
        if job.state.holds_gpus:
            for r in job.replicas:
                if r.node and (node := nodes.get(node_key(cluster, r.node))) is not None:
                    node.used -= r.gpus


def _pool_of(job: Job, cluster: str, nodes: dict[str, NodeInfo]) -> PoolKey | None:
    if job.pool:
        return (cluster, job.pool)
    for r in job.replicas:
        n = nodes.get(node_key(cluster, r.node)) if r.node else None
        if n and n.pool:
            return n.pool
    return None


def _pool_removed(cluster: str, job: Job, pools: dict[PoolKey, PoolInfo]) -> bool:
    """Queued in a pool of a cluster the specs still have, but not in that pool (a fan-out
    candidate the cluster places, or a job it runs where the plan said)."""
    return (
        job.pool is not None
        and (cluster, job.pool) not in pools
        and any(c == cluster for c, _ in pools)
    )


def _restarts_within_min_runtime(
    req: JobRequest, pools: dict[PoolKey, PoolInfo], now: datetime
) -> bool:
    """A running job a resize would restart (a new job on Slurm) within its minRuntime."""
    pool = pools.get(req.pool) if req.pool is not None else None
    return (
        pool is not None
        and pool.resize_restarts
        and req.min_runtime is not None
        and req.started_at is not None
        and (now - req.started_at).total_seconds() < req.min_runtime
        and len(req.placed) < req.replicas
    )


def _ending(job: Job) -> bool:
    """Winding down (a cancel or eviction under way): cancelling it again changes nothing."""
    return job.state is JobState.COMPLETING


def _rivals_of_a_finished_winner(
    seen: list[tuple[str, Job]],
    active: list[tuple[str, Job]],
    cost: Callable[[str, Job], float],
    now: datetime,
) -> tuple[tuple[str, Job], list[tuple[str, Job]]] | None:
    """A fan-out workload's candidate that ran to completion before a plan saw it run, and
    the candidates of its round (submitted by the same plan) still active: they lost. Of
    several that completed, the round's winner (the one its checkpoint progress counts)."""
    done: dict[str, list[tuple[str, Job]]] = {}
    for c, j in seen:
        if j.state is JobState.COMPLETED and j.plan_id:
            done.setdefault(j.plan_id, []).append((c, j))
    losers = [(c, j) for c, j in active if j.plan_id in done]
    if not losers:
        return None
    finished = done[losers[0][1].plan_id or ""]
    return round_winner(finished, lambda cj: (cj[1].started_at or now, cost(*cj), cj[1].id)), losers


def _outdated(queued: list[tuple[str, Job]], digest: str) -> bool:
    """Jobs waiting in a cluster's queue, all made of another version of the spec (known
    by the digest they carry; a job without one is left as it is)."""
    return all(j.spec_digest is not None and j.spec_digest != digest for _, j in queued)


def _done(
    req: JobRequest,
    spec: WorkloadSpec,
    seen: list[tuple[str, Job]],
    observed: Snapshot,
    nodes: dict[str, NodeInfo],
) -> bool:
    """A job of the workload completed, and its spec was not edited while the last one ran
    in a way it could not follow (solvers/problem/edits.py): such an edit asked for the new
    version, which runs once the old one ends."""
    last = next(iter(last_completed(j for _, j in seen).values()), None)
    if last is None:
        return False
    if not edited_while_running(last, spec.digest, observed.spec_since.get(req.key)):
        return True
    old = observed.versions.get(last.spec_digest or "")
    cluster = next(c for c, j in seen if j is last)
    qualifies = _pool_of(last, cluster, nodes) in req.pools
    return old is not None and followed(old, spec, pool_qualifies=qualifies, job=last)


def held_now(problem: Problem, observed: Snapshot) -> tuple[dict[str, float], dict[str, float]]:
    """GPUs each queue's running work holds, and its non-preemptible work: as observed, so
    an edited job counts by the shape it runs in, not its spec's new one."""
    gpus = {
        (c.name, j.id): sum(r.gpus for r in j.replicas)
        for c in observed.clusters
        for j in c.jobs
        if j.workload in problem.jobs
    }
    held: dict[str, float] = defaultdict(float)
    held_np: dict[str, float] = defaultdict(float)
    for job in problem.jobs.values():
        if not job.running:
            continue
        size = gpus.get((job.cluster or "", job.job_id or ""), len(job.placed) * job.gpus)
        for qid in problem.chain(job.queue):
            held[qid] += size
            if not job.preemptible:
                held_np[qid] += size
    return held, held_np
