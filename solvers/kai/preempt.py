"""Preempt: inside one project, a waiting job evicts strictly lower-priority work.

Priority orders work *within* a project (KAI's job priority: train 50, build 100,
inference 125); quota decides *between* projects, which is reclaim's business. So:

* Victims: preemptible jobs of the same project with a strictly lower priority.
* A non-preemptible preemptor must stay within deserved with its non-preemptible work on
  every level (its own running replicas count); otherwise nothing happens, since it could
  never be placed on borrowed GPUs anyway.
* The victim set is KAI's first sufficient one in victim order, verified by simulation
  (solvers/kai/victims.py); victims placed again are moved instead of evicted.
* A job a limit keeps out where stand-ins of work on a cluster that did not answer hold
  some of the limit preempts nothing (``held_back``): holds block new work, they do not
  evict, and the room it would take from its own project may be theirs.
"""

from __future__ import annotations

from solvers import reasons
from solvers.kai.candidates import Holders, VictimFilter
from solvers.kai.disruption import Disruption, Ledger
from solvers.kai.limits import held_back
from solvers.policy import Deadline
from solvers.problem import JobRequest, PoolKey
from solvers.session import Session
from specs.actions import Reason


class Preempt(Disruption):
    name = "preemption"

    def admits(self, job: JobRequest, count: int) -> bool:
        s, req = self.s, count * job.gpus
        if held_back(s, job, req):
            return False
        return job.preemptible or all(
            s.alloc_np[q.id] + req <= q.deserved for q in s.chain(job.queue)
        )

    def victim_queues(self, job: JobRequest) -> list[str]:
        return [job.queue]

    def victim_filter(self, job: JobRequest) -> VictimFilter:
        jobs = self.s.problem.jobs
        return (lambda qid: qid == job.queue), (
            lambda key: jobs[key].priority < job.priority and key != job.key
        )

    def may_evict(self, job: JobRequest, victim: JobRequest) -> bool:
        return victim.queue == job.queue and victim.priority < job.priority

    def most_freed(self, job: JobRequest, pools: set[PoolKey], holders: Holders) -> float:
        return holders.below(job.queue, pools, job.priority)

    def why_evicted(self, job: JobRequest, victim: JobRequest, count: int) -> Reason:
        project = self.s.problem.queues[job.queue].name
        return reasons.outranked(job.key, job.priority, victim.priority, project)


def preempt(
    session: Session,
    ledger: Ledger,
    *,
    search: str = "indexed",
    deadline: Deadline | None = None,
    retry_twins: bool = False,
) -> None:
    """Run the preempt step on ``session`` (mutating it), recording what it did in ``ledger``."""
    Preempt(session, ledger, search=search, deadline=deadline, retry_twins=retry_twins).run()
