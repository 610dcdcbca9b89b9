"""The allocate step: place pending work in KAI's order, without disturbing anything.

1. Pick the next job: walk the tree from the top, at each level taking the child queue
   that comes first in *queue order* for the best job of its subtree; inside a project,
   *job order*. The order is re-evaluated after every placement.
2. Check the hard limits on the project and every ancestor: ``limit`` for all work, and
   ``deserved`` for non-preemptible work (it may never run on borrowed GPUs).
3. Place the gang all-or-nothing by bin-packing; elastic replicas beyond ``minReplicas``
   are added one per later pick.
4. A job that fails is dropped for this pass, with the reason it waits.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from solvers import reasons
from solvers.problem import JobRequest, Queue
from solvers.session import Session
from specs.actions import Reason, ReasonCode


@dataclass(frozen=True)
class Grant:
    """A workload newly started, or grown, by this pass."""

    key: str
    nodes: tuple[str, ...]  # node keys of every replica after the pass
    pool: tuple[str, str]
    reason: Reason


def job_order_key(job: JobRequest, placed: int) -> tuple[int, int, object, str]:
    """Higher priority, then gangs below min, at min, above min, then older, then name."""
    tier = 0 if placed < job.min_replicas else (1 if placed == job.min_replicas else 2)
    return (-job.priority, tier, job.created, job.key)


def next_chunk(job: JobRequest, placed: int) -> int:
    """Replicas the next pick asks for: the whole gang, then one elastic replica at a time."""
    return job.min_replicas - placed if placed < job.min_replicas else 1


def place(session: Session, job: JobRequest, count: int,
          prefer: list[str] | None = None) -> list[str] | None:
    """Bin-pack ``count`` replicas of ``job`` as one gang and charge them; None if they do not fit.

    A job that already holds GPUs stays in its pool: its replicas form one gang. With
    ``prefer`` (the nodes a job was just evicted from), the replicas go back there when
    they fit, so a job that finds its old place free is not restarted elsewhere."""
    s = session
    pools = s.pools_for(job)
    back = (prefer or [])[:count]
    if len(back) == count and all(
            s.index.free.get(n, 0) >= c * job.gpus and s.index.pool_of[n] in pools
            for n, c in Counter(back).items()):
        nodes: list[str] | None = list(back)
        for n in back:
            s.index.take(n, job.gpus)
    else:
        nodes = s.index.place_gang(pools, job.gpus, count, frozenset(s.tasks.get(job.key, ())))
    if nodes is None:
        return None
    s.tasks.setdefault(job.key, []).extend(nodes)
    s.pool[job.key] = s.index.pool_of[nodes[0]] if nodes else pools[0]
    s.charge(job, count * job.gpus)
    return nodes


HeapEntry = tuple[tuple[int, int, object, str], str]  # (job order key, workload)


class Allocator:
    """KAI's allocate loop; also the *order* the disruptive steps and their simulations use.

    ``keys`` restricts the jobs taken into account (default: every job that wants GPUs) and
    ``counts`` overrides how many replicas a job asks for next (a simulation places a gang
    one task at a time, as KAI's job solver does).
    """

    def __init__(self, session: Session, keys: Iterable[str] | None = None,
                 counts: dict[str, int] | None = None,
                 prefer: dict[str, list[str]] | None = None,
                 heaps: dict[str, list[HeapEntry]] | None = None) -> None:
        self.s = session
        self.prefer = prefer or {}
        # ``heaps``: jobs already in job order per project (a simulation reuses them)
        self.heaps: dict[str, list[HeapEntry]] = heaps if heaps is not None else {}
        self.grants: dict[str, Grant] = {}
        self.pending: dict[str, Reason] = {}
        self.counts = counts or {}
        self._cache: dict[str, tuple[tuple[object, ...], str] | None] = {}
        jobs = session.problem.jobs
        for job in (jobs.values() if keys is None else (jobs[k] for k in keys)):
            placed = len(session.tasks.get(job.key, []))
            if job.blocked is not None and not job.running:
                self.pending[job.key] = job.blocked
            elif placed < job.replicas:
                self._push(job, placed)

    def _push(self, job: JobRequest, placed: int) -> None:
        heapq.heappush(self.heaps.setdefault(job.queue, []), (job_order_key(job, placed), job.key))
        if self._cache:
            self.forget(job.queue)

    def chunk(self, job: JobRequest) -> int:
        """Replicas the job asks for on its next pick."""
        return self.counts.get(job.key) or next_chunk(job, len(self.s.tasks.get(job.key, [])))

    # -------------------------------------------------------------- queue order

    def queue_key(self, q: Queue, job: JobRequest) -> tuple[object, ...]:
        s = self.s
        req = self.chunk(job) * job.gpus
        alloc = s.alloc[q.id]
        share = s.allocatable_share(q)
        if share > 0:
            with_job, without = (alloc + req) / share, alloc / share
        else:
            with_job = without = alloc * 1000
        return (
            0 if alloc + req <= q.deserved else 1,  # within deserved first
            -q.priority,
            1 if share == 0 and req > 0 else 0,  # no share at all: last
            with_job,
            without,
            share,
            s.problem.order[q.id],
        )

    def best(self, qid: str) -> str | None:
        """The job the subtree of ``qid`` offers next."""
        entry = self._entry(qid)
        return entry[1] if entry else None

    def _entry(self, qid: str) -> tuple[tuple[object, ...], str] | None:
        # (queue key, best job) of a subtree, kept until a pop or a placement below it
        if qid in self._cache:
            return self._cache[qid]
        q = self.s.problem.queues[qid]
        if q.kind == "project":
            heap = self.heaps.get(qid)
            job = heap[0][1] if heap else None
        else:
            job = self._best_among(q.children)
        entry = None if job is None else (self.queue_key(q, self.s.problem.jobs[job]), job)
        self._cache[qid] = entry
        return entry

    def _best_among(self, qids: list[str]) -> str | None:
        best: tuple[tuple[object, ...], str] | None = None
        for qid in qids:
            entry = self._entry(qid)
            if entry is not None and (best is None or entry[0] < best[0]):
                best = entry
        return best[1] if best else None

    def forget(self, qid: str | None = None) -> None:
        """Drop cached order below the queues whose allocation changed (all if None)."""
        if qid is None:
            self._cache.clear()
            return
        for q in self.s.chain(qid):
            self._cache.pop(q.id, None)

    # -------------------------------------------------------------- the loop

    def pop_next(self) -> str | None:
        """Take the next job in queue order, or None when done. The order is re-evaluated
        after every pick: the picked job's queue and its ancestors are computed afresh."""
        key = self._best_among(self.s.problem.top)
        if key is not None:
            queue = self.s.problem.jobs[key].queue
            heapq.heappop(self.heaps[queue])
            self.forget(queue)
        return key

    def run(self) -> None:
        jobs = self.s.problem.jobs
        while (key := self.pop_next()) is not None:
            job = jobs[key]
            placed = len(self.s.tasks.get(key, []))
            count = self.chunk(job)
            reason = self.check_limits(job, count * job.gpus) or self._place(job, count)
            if reason is None:
                if len(self.s.tasks[key]) < job.replicas:
                    self._push(job, len(self.s.tasks[key]))
            elif placed < job.min_replicas:
                self.pending[key] = reason

    def check_limits(self, job: JobRequest, gpus: int) -> Reason | None:
        """The hard caps: limits on every level, deserved for non-preemptible work."""
        s = self.s
        for q in s.chain(job.queue):
            if q.limit is not None and s.alloc[q.id] + gpus > q.limit:
                return reasons.over_limit(q, s.alloc[q.id] + gpus)
        if not job.preemptible:
            for q in s.chain(job.queue):
                if s.alloc_np[q.id] + gpus > q.deserved:
                    return reasons.non_preemptible_over_deserved(q, s.alloc_np[q.id] + gpus)
        return None

    def _place(self, job: JobRequest, count: int) -> Reason | None:
        s = self.s
        pools = s.pools_for(job)
        if place(s, job, count, self.prefer.get(job.key)) is None:
            return self._why_unplaced(job, pools, count)
        self.grants[job.key] = Grant(
            key=job.key,
            nodes=tuple(s.tasks[job.key]),
            pool=s.pool[job.key],
            reason=self.why_granted(job),
        )
        return None

    def why_granted(self, job: JobRequest) -> Reason:
        q = self.s.problem.queues[job.queue]
        alloc = self.s.alloc[q.id]
        if job.running:
            return Reason(
                code=ReasonCode.ELASTIC_EXPAND,
                message=f"grows to {len(self.s.tasks[job.key])} of {job.replicas} replicas "
                f"on idle GPUs; project {q.name} holds {_n(alloc)} GPUs",
            )
        if alloc <= q.deserved:
            return Reason(
                code=ReasonCode.WITHIN_DESERVED,
                message=f"project {q.name} holds {_n(alloc)} of its deserved {_n(q.deserved)} GPUs "
                "with this workload",
            )
        return Reason(
            code=ReasonCode.OVER_QUOTA,
            message=f"project {q.name} holds {_n(alloc)} GPUs, {_n(alloc - q.deserved)} above its "
            f"deserved {_n(q.deserved)} (fair share {_n(self.s.fair.get(q.id, 0))}); "
            "runs on idle GPUs and may be reclaimed",
        )

    def _why_unplaced(self, job: JobRequest, pools: list[tuple[str, str]], count: int) -> Reason:
        total = largest = 0
        for p in pools:
            t, biggest = self.s.index.pool_free(p)
            total, largest = total + t, max(largest, biggest)
        return reasons.no_room(count, job.gpus, pools, total, largest,
                               gang_would_fit_in_total=total >= count * job.gpus)


def allocate(session: Session, prefer: dict[str, list[str]] | None = None) -> Allocator:
    """Run the allocate step on ``session`` (mutating it); the result holds grants and reasons.

    ``prefer`` maps a job to nodes it should return to when they have room (see ``place``)."""
    allocator = Allocator(session, prefer=prefer)
    allocator.run()
    return allocator


def _n(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}"
