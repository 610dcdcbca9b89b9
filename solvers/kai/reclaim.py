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

Holds block new work; they do not evict. What stand-ins of work on a cluster that did
not answer hold (controlplane/unreachable.py) counts on the reclaimer's side: its gate,
its deserved, its ratio, so a project holding them reclaims no sooner. On a victim's
side a queue is measured by what the work the clusters show holds (``Session.seen``):
stand-ins never make a project, or a department, give up its running work. Nor does a
limit whose room stand-ins take make a job reclaim (``held_back``: taking from siblings
under a department's limit would be taking for them).

Victims the simulation places again are moved, not evicted, and only the evicted ones
count as reclaimed GPUs (KAI's ``allowConsolidatingReclaim``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from solvers import reasons
from solvers.kai.candidates import Holders, VictimFilter
from solvers.kai.disruption import Disruption, Ledger, SideBound
from solvers.kai.limits import held_back
from solvers.policy import Deadline
from solvers.problem import JobRequest, Queue
from solvers.session import Session, Statement
from specs.actions import Reason


class Reclaim(Disruption):
    bounded = True
    name = "reclaim"

    def __init__(self, session: Session, ledger: Ledger, **options: Any) -> None:
        super().__init__(session, ledger, **options)
        self._sides: dict[tuple[str, str], tuple[Queue, Queue]] = {}

    def admits(self, job: JobRequest, count: int) -> bool:
        s, req = self.s, count * job.gpus
        q = s.problem.queues[job.queue]
        if s.alloc[q.id] + req > s.fair.get(q.id, 0.0) or held_back(s, job, req):
            return False
        return job.preemptible or s.alloc_np[q.id] + req <= q.deserved

    def may_evict(self, job: JobRequest, victim: JobRequest) -> bool:
        if victim.queue == job.queue:
            return False
        project = self.s.problem.queues[victim.queue]
        if self._may_take_from(job, project):
            return True
        return self._gpu_type(victim) in self._types_owed(job, project)

    def _may_take_from(self, job: JobRequest, project: Queue) -> bool:
        s = self.s
        mine, theirs = self.sides(job.queue, project.id)
        if s.alloc[mine.id] + self.count * job.gpus <= mine.deserved:
            return s.seen(theirs.id) > theirs.deserved
        return s.seen(theirs.id) > s.allocatable_share(theirs)

    def _types_owed(self, job: JobRequest, project: Queue) -> set[str]:
        """Per-GPU-type quotas: the types the victim's side holds beyond its deserved of
        that type while the reclaimer's side, with the job, stays within its own (its
        deserved on the type if its quota is per type, else its deserved)."""
        s = self.s
        if not s.per_type:
            return set()
        mine, theirs = self.sides(job.queue, project.id)
        if theirs.typed is None:
            return set()
        req = self.count * job.gpus
        return {
            t
            for t in {s.problem.pools[p].gpu_type for p in job.pools}
            if s.alloc_t[theirs.id, t] > theirs.on(t).deserved and self._within(mine, t, req)
        }

    def _within(
        self,
        mine: Queue,
        gpu_type: str,
        req: float,
        alloc: Mapping[str, float] | None = None,
        alloc_t: Mapping[tuple[str, str], float] | None = None,
    ) -> bool:
        """The reclaimer's side stays within its deserved on the type with ``req`` more
        (its deserved, if its quota is not per type); by the session's allocation, or the
        one given (the step's base)."""
        alloc = self.s.alloc if alloc is None else alloc
        alloc_t = self.s.alloc_t if alloc_t is None else alloc_t
        if mine.typed is None:
            return alloc.get(mine.id, 0.0) + req <= mine.deserved
        return alloc_t.get((mine.id, gpu_type), 0.0) + req <= mine.on(gpu_type).deserved

    def _gpu_type(self, job: JobRequest) -> str | None:
        pool = self.s.pool.get(job.key)
        return self.s.problem.pools[pool].gpu_type if pool else None

    def victim_filter(self, job: JobRequest) -> VictimFilter:
        """``may_evict`` depends on the victim's project only, decided once per project;
        with per-GPU-type quotas, a project owing only some types gives only those (without
        them, every job of a project it may take from may go: no job test)."""
        queues, jobs = self.s.problem.queues, self.s.problem.jobs
        verdict: dict[str, bool] = {}
        owed: dict[str, set[str]] = {}

        def project_ok(qid: str) -> bool:
            if qid not in verdict:
                whole = qid != job.queue and self._may_take_from(job, queues[qid])
                owed[qid] = (
                    set() if whole or qid == job.queue else self._types_owed(job, queues[qid])
                )
                verdict[qid] = whole or bool(owed[qid])
            return verdict[qid]

        def job_ok(key: str) -> bool:
            types = owed.get(jobs[key].queue)
            return not types or self._gpu_type(jobs[key]) in types

        return project_ok, (job_ok if self.s.per_type else None)

    def accept(self, job: JobRequest, k: int, trial: Statement) -> bool:
        s, alloc, req = self.s, self.base_alloc, k * job.gpus
        # the GPUs really taken, per victim project: an elastic victim's replicas above its
        # minimum one by one, then its core gang as one piece (KAI's victim resources)
        taken: dict[str, list[tuple[float, str | None]]] = defaultdict(list)
        for key in sorted(trial.removed):
            victim, lost = s.problem.jobs[key], trial.evicted_count(key)
            if lost <= 0:
                continue
            extra = max(0, lost - victim.min_replicas)
            t = self._type_before(key)
            taken[victim.queue] += [(victim.gpus, t)] * extra + [((lost - extra) * victim.gpus, t)]
        left: dict[str, float] = {}
        left_t: dict[tuple[str, str], float] = {}  # per-GPU-type quotas: by (side, type)
        for qid in sorted(taken):
            mine, theirs = self.sides(job.queue, qid)
            left.setdefault(theirs.id, self._given(theirs.id))
            for gpus, gpu_type in taken[qid]:
                if not self._still_reclaimable(mine, theirs, left[theirs.id], req):
                    side_type = (theirs.id, gpu_type or "")
                    left_t.setdefault(side_type, self.base_alloc_t.get(side_type, 0.0))
                    if gpu_type is None or not self._still_owed(
                        mine, theirs, gpu_type, left_t[side_type], req
                    ):
                        return False
                    left_t[side_type] -= gpus
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
        if s.per_type:
            return math.inf  # a type owed is not bounded by the sums below
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
        held = self._given(theirs.id)
        cap = held - threshold + piece if held > threshold else 0.0
        return min(cap, self._fair_cap(mine, theirs, req, inside))

    def _fair_cap(self, mine: Queue, theirs: Queue, req: float, inside: float) -> float:
        """What the fair-share-ratio rule lets ``theirs`` give at most: where the reclaimer's
        side would be over its fair share, only while the victim side's allocation over its
        fair share stays above the reclaimer's (no bound otherwise)."""
        s = self.s
        ratio = _ratio(self.base_alloc[mine.id] - inside + req, s.fair.get(mine.id, 0.0))
        fair = s.fair.get(theirs.id, 0.0)
        if ratio > 1 and fair > 0:
            return max(0.0, self._given(theirs.id) - ratio * fair)
        return math.inf

    def side_bound(self, job: JobRequest, count: int, holders: Holders) -> SideBound | None:
        if self.s.per_type:
            return None
        return _SideCaps(self, job, count * job.gpus, holders)

    def _still_owed(
        self, mine: Queue, theirs: Queue, gpu_type: str, left: float, req: float
    ) -> bool:
        """Per-GPU-type quotas: the victim's side still holds more of the type than its
        deserved on it, and the reclaimer's side stays within its own with the job."""
        if not self.s.per_type or theirs.typed is None:
            return False
        within = self._within(mine, gpu_type, req, self.base_alloc, self.base_alloc_t)
        return left > theirs.on(gpu_type).deserved and within

    def _type_before(self, key: str) -> str | None:
        """The GPU type a victim held before the trial (its pool then)."""
        pool = self.s.pool.get(key)  # an eviction leaves the pool as it was
        return self.s.problem.pools[pool].gpu_type if pool else None

    def _reclaimable_by_sum(self, mine: Queue, theirs: Queue, req: float) -> bool:
        return self._still_reclaimable(mine, theirs, self._given(theirs.id), req)

    def _given(self, qid: str) -> float:
        """What a victim side held by work the clusters show when the search for this job
        began: its allocation less what stand-ins hold (they are no reason to give)."""
        unseen = self.s.unseen
        return self.base_alloc[qid] - unseen.get(qid, 0.0) if unseen else self.base_alloc[qid]

    def _still_reclaimable(self, mine: Queue, theirs: Queue, left: float, req: float) -> bool:
        if left > self.s.allocatable_share(theirs):
            return True
        return self.base_alloc[mine.id] + req <= mine.deserved and left > theirs.deserved

    def sides(self, mine: str, theirs: str) -> tuple[Queue, Queue]:
        """The two queues where the chains from the top part ways."""
        known = self._sides.get((mine, theirs))
        if known is None:
            known = self._sides[mine, theirs] = self._part(mine, theirs)
        return known

    def _part(self, mine: str, theirs: str) -> tuple[Queue, Queue]:
        a, b = self.s.chain(mine)[::-1], self.s.chain(theirs)[::-1]
        for x, y in zip(a, b, strict=False):
            if x.id != y.id:
                return x, y
        return a[min(len(a), len(b)) - 1], b[min(len(a), len(b)) - 1]

    def why_evicted(self, job: JobRequest, victim: JobRequest, count: int) -> Reason:
        s, alloc, req = self.s, self.base_alloc, count * job.gpus
        mine, theirs = self.sides(job.queue, victim.queue)
        gpu_type = self._type_before(victim.key)
        if (
            gpu_type is not None
            and not self._reclaimable_by_sum(mine, theirs, req)
            and self._still_owed(
                mine, theirs, gpu_type, self.base_alloc_t[theirs.id, gpu_type], req
            )
        ):
            return reasons.reclaimed_type(
                mine,
                theirs,
                gpu_type,
                self.base_alloc_t[theirs.id, gpu_type],
                job.key,
            )
        return reasons.reclaimed(
            mine,
            alloc[mine.id],
            s.fair.get(mine.id, 0.0),
            alloc[mine.id] + req <= mine.deserved,
            theirs,
            self._given(theirs.id),
            s.allocatable_share(theirs),
            job.key,
            ran=s.problem.ran_before(victim.key),
        )


class _SideCaps:
    """``most_taken``'s cap per victim side for one waiting job, whichever victims of the
    side a set holds: its largest piece is at most the largest any candidate under the
    side holds, and what the set holds under the reclaimer's own chain at most ``inside``
    (the cap only grows with both)."""

    def __init__(self, step: Reclaim, job: JobRequest, req: float, holders: Holders) -> None:
        self.step, self.job, self.req, self.holders = step, job, req, holders
        self._pieces: dict[str, float] = {}

    def side(self, qid: str) -> str:
        return self.step.sides(self.job.queue, qid)[1].id

    def cap(self, qid: str, inside: Mapping[str, float]) -> float:
        mine, theirs = self.step.sides(self.job.queue, qid)
        piece = self._pieces.get(theirs.id)
        if piece is None:
            piece = self._pieces[theirs.id] = self.holders.largest_under(theirs)
        return self.step._side_cap(mine, theirs, self.req, piece, inside.get(mine.id, 0.0))


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
