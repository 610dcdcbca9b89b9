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
from dataclasses import dataclass

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


class Allocator:
    def __init__(self, session: Session) -> None:
        self.s = session
        self.heaps: dict[str, list[tuple[tuple[int, int, object, str], str]]] = {}
        self.grants: dict[str, Grant] = {}
        self.pending: dict[str, Reason] = {}
        for job in session.problem.jobs.values():
            placed = len(session.tasks.get(job.key, []))
            if job.blocked is not None and not job.running:
                self.pending[job.key] = job.blocked
            elif placed < job.replicas:
                self._push(job, placed)

    def _push(self, job: JobRequest, placed: int) -> None:
        heapq.heappush(self.heaps.setdefault(job.queue, []), (job_order_key(job, placed), job.key))

    # -------------------------------------------------------------- queue order

    def queue_key(self, q: Queue, job: JobRequest) -> tuple[object, ...]:
        s = self.s
        placed = len(s.tasks.get(job.key, []))
        req = next_chunk(job, placed) * job.gpus
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
        q = self.s.problem.queues[qid]
        if q.kind == "project":
            heap = self.heaps.get(qid)
            return heap[0][1] if heap else None
        return self._best_among(q.children)

    def _best_among(self, qids: list[str]) -> str | None:
        jobs = self.s.problem.jobs
        candidates = []
        for qid in qids:
            key = self.best(qid)
            if key is not None:
                candidates.append((self.queue_key(self.s.problem.queues[qid], jobs[key]), key))
        return min(candidates)[1] if candidates else None

    # -------------------------------------------------------------- the loop

    def run(self) -> None:
        jobs = self.s.problem.jobs
        while (key := self._best_among(self.s.problem.top)) is not None:
            job = jobs[key]
            heapq.heappop(self.heaps[job.queue])
            placed = len(self.s.tasks.get(key, []))
            count = next_chunk(job, placed)
            reason = self._check_limits(job, count * job.gpus) or self._place(job, count)
            if reason is None:
                if len(self.s.tasks[key]) < job.replicas:
                    self._push(job, len(self.s.tasks[key]))
            elif placed < job.min_replicas:
                self.pending[key] = reason

    def _check_limits(self, job: JobRequest, gpus: int) -> Reason | None:
        s = self.s
        for q in s.chain(job.queue):
            if q.limit is not None and s.alloc[q.id] + gpus > q.limit:
                return Reason(
                    code=ReasonCode.OVER_LIMIT,
                    message=f"{q.kind} {q.name} would hold {_n(s.alloc[q.id] + gpus)} GPUs, "
                    f"above its limit of {_n(q.limit)}",
                )
        if not job.preemptible:
            for q in s.chain(job.queue):
                if s.alloc_np[q.id] + gpus > q.deserved:
                    return Reason(
                        code=ReasonCode.NON_PREEMPTIBLE_OVER_DESERVED,
                        message=f"non-preemptible work of {q.kind} {q.name} would use "
                        f"{_n(s.alloc_np[q.id] + gpus)} GPUs, above its deserved {_n(q.deserved)}; "
                        "non-preemptible work must fit within deserved quota",
                    )
        return None

    def _place(self, job: JobRequest, count: int) -> Reason | None:
        s = self.s
        pools = [s.pool[job.key]] if job.key in s.pool else job.pools
        nodes = s.index.place_gang(pools, job.gpus, count)
        if nodes is None:
            return self._why_unplaced(job, pools, count)
        s.tasks.setdefault(job.key, []).extend(nodes)
        s.pool[job.key] = s.index.pool_of[nodes[0]] if nodes else pools[0]
        s.charge(job, count * job.gpus)
        self.grants[job.key] = Grant(
            key=job.key,
            nodes=tuple(s.tasks[job.key]),
            pool=s.pool[job.key],
            reason=self._why_granted(job),
        )
        return None

    def _why_granted(self, job: JobRequest) -> Reason:
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
            t, l = self.s.index.pool_free(p)
            total, largest = total + t, max(largest, l)
        shape = f"{count} x {job.gpus} GPUs" if count > 1 else f"{job.gpus} GPUs"
        names = ", ".join(sorted({f"{c}/{p}" for c, p in pools}))
        if count > 1 and total >= count * job.gpus:
            return Reason(
                code=ReasonCode.GANG_UNPLACEABLE,
                message=f"gang of {shape} must start at once in one pool; {total} GPUs are free "
                f"in {names} but not {count} nodes with {job.gpus} free each",
            )
        return Reason(
            code=ReasonCode.NO_CAPACITY,
            message=f"needs {shape}; eligible pools {names} have {total} free "
            f"(largest block {largest} on one node)",
        )


def allocate(session: Session) -> Allocator:
    """Run the allocate step on ``session`` (mutating it); the result holds grants and reasons."""
    allocator = Allocator(session)
    allocator.run()
    return allocator


def _n(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}"
