"""Consolidation: move running work so that a waiting job's gang finds whole nodes.

Free GPUs scattered over nodes can add up to a job's request while no node has room for
a replica. KAI's consolidation packs running jobs tighter instead of evicting anyone:

* Only a *preemptible* waiting job may ask, and only when the free GPUs of its pools
  cover its request (otherwise packing cannot help).
* Preemptible running jobs of any project may be moved; non-preemptible ones never, nor
  work winding down (its workload would start elsewhere before the old job ended).
* A candidate set is accepted only if the simulation places every moved job again: no
  victim may end evicted. The moves and the waiting job's start go into one plan.

minRuntime does not protect against a move (KAI applies it to reclaim and preempt only):
a moved job keeps its place in the cluster.
"""

from __future__ import annotations

from solvers.kai.candidates import VictimFilter
from solvers.kai.disruption import Disruption, Ledger
from solvers.policy import Deadline
from solvers.problem import JobRequest
from solvers.session import Session, Statement
from specs.actions import Reason


class Consolidate(Disruption):
    bounded = True
    name = "consolidation"
    min_runtime_protects = False

    def admits(self, job: JobRequest, count: int) -> bool:
        if not job.preemptible:
            return False
        s = self.s
        pools = s.pools_for(job)
        return sum(s.index.pool_free(p)[0] for p in pools) >= count * job.gpus

    def may_evict(self, job: JobRequest, victim: JobRequest) -> bool:
        # any preemptible running job, of any project, but one winding down (moved, its
        # workload would start elsewhere before the old job has ended and saved) or one
        # whose eviction failed lately
        return victim.evictable

    def victim_filter(self, job: JobRequest) -> VictimFilter:
        jobs = self.s.problem.jobs
        return (lambda qid: True), (lambda key: key != job.key and jobs[key].evictable)

    def accept(self, job: JobRequest, k: int, trial: Statement) -> bool:
        return all(trial.evicted_count(key) == 0 for key in trial.removed)

    def most_taken(
        self, job: JobRequest, count: int, held: dict[str, float], largest: dict[str, float]
    ) -> float:
        return 0.0  # every moved job lands again: nothing is taken

    def why_evicted(self, job: JobRequest, victim: JobRequest, count: int) -> Reason:
        raise AssertionError("consolidation never evicts")  # accept() refuses any eviction


def consolidate(
    session: Session,
    ledger: Ledger,
    *,
    search: str = "indexed",
    deadline: Deadline | None = None,
    retry_twins: bool = False,
) -> None:
    """Run the consolidation step on ``session`` (mutating it), recording moves in ``ledger``."""
    Consolidate(session, ledger, search=search, deadline=deadline, retry_twins=retry_twins).run()
