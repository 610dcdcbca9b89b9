"""Scratch state of one scheduling pass: allocations per queue, free GPUs, fair shares.

The allocate (and later reclaim / preempt / consolidate) steps all read and update one
:class:`Session`; it is created from a :class:`~solvers.problem.Problem` and thrown away.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from solvers.fairshare import ShareNode, compute_fair_shares
from solvers.placement import FreeIndex
from solvers.problem import JobRequest, Problem, Queue


@dataclass
class Session:
    problem: Problem
    index: FreeIndex
    alloc: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    alloc_np: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    fair: dict[str, float] = field(default_factory=dict)
    tasks: dict[str, list[str]] = field(default_factory=dict)  # workload -> node keys
    pool: dict[str, tuple[str, str]] = field(default_factory=dict)  # workload -> pool
    _chains: dict[str, list[Queue]] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, problem: Problem, usage: dict[str, float] | None = None, k: float = 1.0,
             k_by_queue: dict[str, float] | None = None) -> Session:
        """Charge running work and divide fair shares; ``usage`` (normalised past usage by
        queue id) and ``k`` bend only the over-quota split (time-based fairshare)."""
        distinct = frozenset(k for k, p in problem.pools.items() if p.one_replica_per_node)
        s = cls(problem, FreeIndex(problem.nodes, distinct))
        for job in problem.jobs.values():
            if job.running:
                s.tasks[job.key] = list(job.placed)
                if job.pool:
                    s.pool[job.key] = job.pool
                s.charge(job, len(job.placed) * job.gpus)
        s.fair = _fair_shares(problem, s, usage or {}, k, k_by_queue or {})
        return s

    def chain(self, queue_id: str) -> list[Queue]:
        """The queue and its ancestors, leaf first (cached: the tree is fixed for a session)."""
        if queue_id in self._chains:
            return self._chains[queue_id]
        out = []
        q: Queue | None = self.problem.queues.get(queue_id)
        while q is not None:
            out.append(q)
            q = self.problem.queues.get(q.parent) if q.parent else None
        self._chains[queue_id] = out
        return out

    def pools_for(self, job: JobRequest) -> list[tuple[str, str]]:
        """Where the job may place replicas: a job holding GPUs grows in its own pool (one
        Slurm job, one partition); one that holds none — new, or evicted from everywhere
        earlier in this plan — may use any eligible pool."""
        if self.tasks.get(job.key) and job.key in self.pool:
            return [self.pool[job.key]]
        return job.pools

    def charge(self, job: JobRequest, gpus: float) -> None:
        for q in self.chain(job.queue):
            self.alloc[q.id] += gpus
            if not job.preemptible:
                self.alloc_np[q.id] += gpus

    def allocatable_share(self, q: Queue) -> float:
        """max(deserved, fair share), capped by the limit."""
        share = max(q.deserved, self.fair.get(q.id, 0.0))
        return share if q.limit is None else min(share, q.limit)


def _fair_shares(problem: Problem, s: Session, usage: dict[str, float], k: float,
                 k_by_queue: dict[str, float]) -> dict[str, float]:
    request: dict[str, float] = defaultdict(float)
    for job in problem.jobs.values():
        if job.blocked is not None and not job.running:
            continue
        gpus = job.replicas * job.gpus if not job.running else max(job.replicas, len(job.placed)) * job.gpus
        for q in s.chain(job.queue):
            request[q.id] += gpus

    def share_node(qid: str) -> ShareNode:
        q = problem.queues[qid]
        return ShareNode(
            id=qid,
            deserved=q.deserved,
            limit=q.limit,
            weight=q.weight,
            priority=q.priority,
            request=request[qid],
            usage=usage.get(qid, 0.0),
            k=k_by_queue.get(qid),
            order=(problem.order[qid], q.name),
            children=[share_node(c) for c in q.children],
        )

    return compute_fair_shares([share_node(t) for t in problem.top], problem.total_gpus, k)
