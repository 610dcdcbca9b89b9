"""Why a job waits when no eviction could make room for its shape.

Reclaim and preemption take preemptible work only. Where work no step evicts
(non-preemptible, or a job the cluster refused to evict lately) splits a pool's GPUs so
that no node, or too few, could hold one of the job's replicas even with every
preemptible job there gone, no rule of reclaim's is why it waits, and "no capacity:
8 free (largest block 4)" alone reads as if a reclaim might come. The test is an upper
bound: every evictable job of the pool, whoever's, counted as gone; work winding down is
counted as gone too (it is leaving), and work that is not ours stays. Pure.
"""

from __future__ import annotations

from collections import Counter

from solvers import reasons
from solvers.kai.allocate import next_chunk
from solvers.problem import JobRequest
from solvers.session import Session
from specs.actions import Reason


class Unmovable:
    """The GPUs on each node that evictions could free (our evictable work, and work
    winding down), and the answers given so far (one per shape: pools, GPUs per replica,
    replicas asked). The rest of a node's GPUs is unmovable: non-preemptible work, jobs
    the cluster refused to evict lately, and work that is not ours."""

    def __init__(self, session: Session) -> None:
        self.s = session
        self.movable: Counter[str] = Counter()
        jobs = session.problem.jobs
        for key, nodes in session.tasks.items():
            job = jobs[key]
            if job.evictable or job.ending:
                for n in nodes:
                    self.movable[n] += job.gpus
        self.answers: dict[tuple[object, ...], Reason | None] = {}

    def wait(self, job: JobRequest, reason: Reason) -> Reason:
        """``reason`` (no room), saying what holds the room no eviction could make; as it
        is where evictions could make room for the job's shape in some pool."""
        s = self.s
        count = next_chunk(job, len(s.tasks.get(job.key, [])))
        pools = tuple(s.pools_for(job))
        shape = (pools, job.gpus, count, reason)
        if shape not in self.answers:
            self.answers[shape] = self._answer(job.gpus, count, set(pools), reason)
        return self.answers[shape] or reason

    def _answer(
        self, gpus: int, count: int, pools: set[tuple[str, str]], reason: Reason
    ) -> Reason | None:
        if gpus <= 0:
            return None
        index, nodes = self.s.index, self.s.problem.nodes
        fits: Counter[tuple[str, str]] = Counter()  # replicas each pool could hold
        held = 0
        for node, pool in index.pool_of.items():
            if pool not in pools:
                continue
            room = max(0, index.free[node] + self.movable[node])
            fits[pool] += room // gpus
            held += max(0, nodes[node].capacity - room)
        most = max(fits.values(), default=0)
        if most >= count or not held:
            return None
        return reasons.unmovable_wait(reason, gpus, count, most, held)
