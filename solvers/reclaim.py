"""Reclaim: a waiting job takes GPUs back from *other* queues that hold more than their share.

Idle GPUs may be borrowed beyond deserved quota and fair share; reclaim is how a queue
gets its share back. KAI's rules (shared/conformance/README.md, "Reclaim"):

* Gate: the reclaimer's project, with the job, stays within its fair share; a
  non-preemptible reclaimer also stays within deserved with its non-preemptible work.
* Victims: preemptible jobs of other projects. The reclaimer and a victim are compared
  at the first level where their ancestor chains part (department against department,
  or project against project inside one department). If the reclaimer's side stays within
  its deserved with the job, the victim's side must be above its deserved; otherwise
  above its allocatable share.
* Per victim, just before its removal, the victim's side must still be above its
  allocatable share, or above its deserved while the reclaimer's side stays within its
  own deserved.
* After the reclaim, at every level where the reclaimer would exceed its fair share, its
  allocated / fair share must stay strictly below that of each sibling it took from.

Victims the simulation places again are moved, not evicted, and only the evicted ones
count as reclaimed GPUs (KAI's ``allowConsolidatingReclaim``).
"""

from __future__ import annotations

import math
from collections import defaultdict

from solvers.disruption import Disruption, Ledger, fmt_gpus
from solvers.problem import JobRequest, Queue
from solvers.session import Session
from solvers.victims import Trial
from specs.actions import Reason, ReasonCode


class Reclaim(Disruption):
    name = "reclaim"

    def admits(self, job: JobRequest, count: int) -> bool:
        s, req = self.s, count * job.gpus
        q = s.problem.queues[job.queue]
        if s.alloc[q.id] + req > s.fair.get(q.id, 0.0):
            return False
        return job.preemptible or s.alloc_np[q.id] + req <= q.deserved

    def may_evict(self, job: JobRequest, victim: JobRequest) -> bool:
        if victim.queue == job.queue:
            return False
        s = self.s
        mine, theirs = self.sides(job.queue, victim.queue)
        if s.alloc[mine.id] + self.count * job.gpus <= mine.deserved:
            return s.alloc[theirs.id] > theirs.deserved
        return s.alloc[theirs.id] > s.allocatable_share(theirs)

    def accept(self, job: JobRequest, k: int, trial: Trial) -> bool:
        s, alloc, req = self.s, self.base_alloc, k * job.gpus
        # the GPUs really taken, per victim project: an elastic victim's replicas above its
        # minimum one by one, then its core gang as one piece (KAI's victim resources)
        taken: dict[str, list[float]] = defaultdict(list)
        for key in sorted(trial.removed):
            victim, lost = s.problem.jobs[key], trial.evicted_count(key)
            if lost <= 0:
                continue
            extra = max(0, lost - victim.min_replicas)
            taken[victim.queue] += [victim.gpus] * extra + [(lost - extra) * victim.gpus]
        left: dict[str, float] = {}
        for qid in sorted(taken):
            mine, theirs = self.sides(job.queue, qid)
            left.setdefault(theirs.id, alloc[theirs.id])
            for gpus in taken[qid]:
                if not self._still_reclaimable(mine, theirs, left[theirs.id], req):
                    return False
                for q in s.chain(qid):
                    left[q.id] = left.get(q.id, alloc[q.id]) - gpus
        for q in s.chain(job.queue):
            ratio = _ratio(left.get(q.id, alloc[q.id]) + req, s.fair.get(q.id, 0.0))
            for sib_id, sib_left in left.items():
                sib = s.problem.queues[sib_id]
                if sib.parent != q.parent or sib_id == q.id:
                    continue
                fair = s.fair.get(sib_id, 0.0)
                if ratio > 1 and fair > 0 and ratio >= _ratio(sib_left, fair):
                    return False
            if not job.preemptible and self.base_np[q.id] + req > q.deserved:
                return False
        return True

    def _still_reclaimable(self, mine: Queue, theirs: Queue, left: float, req: float) -> bool:
        if left > self.s.allocatable_share(theirs):
            return True
        return self.base_alloc[mine.id] + req <= mine.deserved and left > theirs.deserved

    def sides(self, mine: str, theirs: str) -> tuple[Queue, Queue]:
        """The two queues where the chains from the top part ways."""
        a, b = self.s.chain(mine)[::-1], self.s.chain(theirs)[::-1]
        for x, y in zip(a, b, strict=False):
            if x.id != y.id:
                return x, y
        return a[min(len(a), len(b)) - 1], b[min(len(a), len(b)) - 1]

    def why_evicted(self, job: JobRequest, victim: JobRequest, count: int) -> Reason:
        s, alloc, req = self.s, self.base_alloc, count * job.gpus
        mine, theirs = self.sides(job.queue, victim.queue)
        if alloc[mine.id] + req <= mine.deserved:
            gains = (f"{mine.kind} {mine.name} is below its deserved {fmt_gpus(mine.deserved)} "
                     f"(holds {fmt_gpus(alloc[mine.id])})")
        else:
            gains = (f"{mine.kind} {mine.name} is below its fair share "
                     f"{fmt_gpus(s.fair.get(mine.id, 0.0))} (holds {fmt_gpus(alloc[mine.id])})")
        held = alloc[theirs.id]
        if held > s.allocatable_share(theirs):
            share = s.allocatable_share(theirs)
            loses = (f"{theirs.kind} {theirs.name} holds {fmt_gpus(held)}, "
                     f"{fmt_gpus(held - share)} over its fair share {fmt_gpus(share)}")
        else:
            loses = (f"{theirs.kind} {theirs.name} holds {fmt_gpus(held)}, "
                     f"{fmt_gpus(held - theirs.deserved)} over its "
                     f"deserved {fmt_gpus(theirs.deserved)}")
        return Reason(code=ReasonCode.RECLAIM, message=f"{gains}; {loses}; reclaimed for {job.key}")


def _ratio(allocated: float, fair: float) -> float:
    if fair == 0:
        return math.inf if allocated > 0 else 0.0
    return allocated / fair


def reclaim(session: Session, ledger: Ledger) -> None:
    """Run the reclaim step on ``session`` (mutating it), recording what it did in ``ledger``."""
    Reclaim(session, ledger).run()
