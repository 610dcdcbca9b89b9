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
from collections.abc import Callable

from solvers import reasons
from solvers.kai.disruption import Disruption, Ledger
from solvers.policy import Deadline
from solvers.problem import JobRequest, Queue
from solvers.session import Session, Statement
from specs.actions import Reason


class Reclaim(Disruption):
    bounded = True
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
        return self._may_take_from(job, self.s.problem.queues[victim.queue])

    def _may_take_from(self, job: JobRequest, project: Queue) -> bool:
        s = self.s
        mine, theirs = self.sides(job.queue, project.id)
        if s.alloc[mine.id] + self.count * job.gpus <= mine.deserved:
            return s.alloc[theirs.id] > theirs.deserved
        return s.alloc[theirs.id] > s.allocatable_share(theirs)

    def victim_filter(self, job: JobRequest) -> tuple[Callable[[str], bool], Callable[[str], bool]]:
        """``may_evict`` depends on the victim's project only: decided once per project."""
        queues = self.s.problem.queues
        verdict: dict[str, bool] = {}

        def project_ok(qid: str) -> bool:
            if qid not in verdict:
                verdict[qid] = qid != job.queue and self._may_take_from(job, queues[qid])
            return verdict[qid]

        return project_ok, (lambda key: True)

    def accept(self, job: JobRequest, k: int, trial: Statement) -> bool:
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

    def never_accepts(self, job: JobRequest, count: int) -> bool:
        """A non-preemptible reclaimer beyond deserved on some level is refused whoever the
        victims are (the last check of ``accept``)."""
        req = count * job.gpus
        return not job.preemptible and any(
            self.base_np[q.id] + req > q.deserved for q in self.s.chain(job.queue)
        )

    def most_taken(
        self, job: JobRequest, count: int, held: dict[str, float], largest: dict[str, float]
    ) -> float:
        """GPUs ``accept`` lets a reclaim take, at most, from victims holding ``held`` GPUs
        per project (the biggest single piece in ``largest``). Per victim side: pieces go
        while the side stays above its threshold (so at most the excess plus one piece),
        and, where the reclaimer is over its fair share, only while the side's allocation
        over fair share stays above the reclaimer's (taking from inside the reclaimer's own
        side, which lowers its ratio, counted in its favour)."""
        s, req = self.s, count * job.gpus
        by_side: dict[str, float] = defaultdict(float)
        big: dict[str, float] = defaultdict(float)
        inside: dict[str, float] = defaultdict(float)  # held under each queue of my chain
        mine_of: dict[str, Queue] = {}
        chain = {q.id for q in s.chain(job.queue)}
        for qid, gpus in held.items():
            if qid == job.queue or gpus <= 0:
                continue
            mine, theirs = self.sides(job.queue, qid)
            by_side[theirs.id] += gpus
            big[theirs.id] = max(big[theirs.id], largest.get(qid, gpus))
            mine_of[theirs.id] = mine
            for q in s.chain(qid):
                if q.id in chain:
                    inside[q.id] += gpus
        total = 0.0
        for side, gpus in by_side.items():
            mine, theirs = mine_of[side], s.problem.queues[side]
            total += min(gpus, self._side_cap(mine, theirs, req, big[side], inside[mine.id]))
        return total

    def _side_cap(
        self, mine: Queue, theirs: Queue, req: float, piece: float, inside: float
    ) -> float:
        s, alloc = self.s, self.base_alloc
        # a piece goes while the side holds more than this (_still_reclaimable)
        within = alloc[mine.id] + req <= mine.deserved
        threshold = theirs.deserved if within else s.allocatable_share(theirs)
        held = alloc[theirs.id]
        cap = held - threshold + piece if held > threshold else 0.0
        ratio = _ratio(alloc[mine.id] - inside + req, s.fair.get(mine.id, 0.0))
        fair = s.fair.get(theirs.id, 0.0)
        if ratio > 1 and fair > 0:
            cap = min(cap, max(0.0, held - ratio * fair))
        return cap

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
        return reasons.reclaimed(
            mine,
            alloc[mine.id],
            s.fair.get(mine.id, 0.0),
            alloc[mine.id] + req <= mine.deserved,
            theirs,
            alloc[theirs.id],
            s.allocatable_share(theirs),
            job.key,
        )


def _ratio(allocated: float, fair: float) -> float:
    if fair == 0:
        return math.inf if allocated > 0 else 0.0
    return allocated / fair


def reclaim(
    session: Session,
    ledger: Ledger,
    *,
    search: str = "indexed",
    deadline: Deadline | None = None,
    retry_twins: bool = False,
) -> None:
    """Run the reclaim step on ``session`` (mutating it), recording what it did in ``ledger``."""
    Reclaim(session, ledger, search=search, deadline=deadline, retry_twins=retry_twins).run()
