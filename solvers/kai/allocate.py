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
from collections.abc import Iterable

from solvers import reasons
from solvers.order import JobKey, QueueKey, job_order, queue_order
from solvers.problem import JobRequest, PoolKey, Queue
from solvers.session import Grant, Session, place
from specs.actions import Reason, ReasonCode


def next_chunk(job: JobRequest, placed: int) -> int:
    """Replicas the next pick asks for: the whole gang, then one elastic replica at a time."""
    return job.min_replicas - placed if placed < job.min_replicas else 1


HeapEntry = tuple[JobKey, str]  # (job order key, workload)
_FIRST_CHECK = 64  # misses in a row before the allocate loop asks whether any job is left


class Allocator:
    """KAI's allocate loop; also the *order* the disruptive steps and their simulations use.

    ``keys`` restricts the jobs taken into account (default: every job that wants GPUs) and
    ``counts`` overrides how many replicas a job asks for next (a simulation places a gang
    one task at a time, as KAI's job solver does).
    """

    def __init__(
        self,
        session: Session,
        keys: Iterable[str] | None = None,
        counts: dict[str, int] | None = None,
        prefer: dict[str, list[str]] | None = None,
        heaps: dict[str, list[HeapEntry]] | None = None,
        at_rest: bool = False,
    ) -> None:
        self.s = session
        # ``at_rest``: nothing is placed between two pops but what ``run`` places itself or
        # the caller tells through ``forget`` (the disruptive steps' order), so a run of
        # one project's jobs comes out without the tree being walked again (``pop_next``)
        self.at_rest = at_rest and not session.per_type
        self._run: tuple[str, int] | None = None  # (project, GPUs asked) of the last pop
        self.prefer = prefer or {}
        # ``heaps``: jobs already in job order per project (a simulation reuses them)
        self.heaps: dict[str, list[HeapEntry]] = heaps if heaps is not None else {}
        self.grants: dict[str, Grant] = {}
        self.pending: dict[str, Reason] = {}
        self.counts = counts or {}
        # set by ``run`` when no job could be placed at all (no room, or limits)
        self.none_placeable = False
        self._cache: dict[str, tuple[tuple[object, ...], str] | None] = {}
        jobs = session.problem.jobs
        for job in jobs.values() if keys is None else (jobs[k] for k in keys):
            placed = len(session.tasks.get(job.key, []))
            if job.blocked is not None and not job.running:
                self.pending[job.key] = job.blocked
            elif placed < job.replicas:
                self._push(job, placed)

    def _push(self, job: JobRequest, placed: int) -> None:
        heapq.heappush(self.heaps.setdefault(job.queue, []), (job_order(job, placed), job.key))
        self._run = None
        if self._cache:
            self.forget(job.queue)

    def requeue(self, job: JobRequest) -> None:
        """Take ``job`` into the order again, with the replicas it holds now."""
        self._push(job, len(self.s.tasks.get(job.key, [])))

    def chunk(self, job: JobRequest) -> int:
        """Replicas the job asks for on its next pick."""
        return self.counts.get(job.key) or next_chunk(job, len(self.s.tasks.get(job.key, [])))

    # -------------------------------------------------------------- queue order

    def queue_key(self, q: Queue, job: JobRequest) -> QueueKey:
        s = self.s
        request = self.chunk(job) * job.gpus
        return queue_order(
            q,
            allocated=s.alloc[q.id],
            request=request,
            share=s.allocatable_share(q),
            rank=s.problem.order[q.id],
            within=s.within_deserved(q, job, request) if s.per_type else None,
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
        cache = self._cache
        for qid in qids:
            entry = cache[qid] if qid in cache else self._entry(qid)
            if entry is not None and (best is None or entry[0] < best[0]):
                best = entry
        return best[1] if best else None

    def forget(self, qid: str | None = None) -> None:
        """Drop cached order below the queues whose allocation changed (all if None)."""
        self._run = None
        if qid is None:
            self._cache.clear()
            return
        for q in self.s.chain(qid):
            self._cache.pop(q.id, None)

    # -------------------------------------------------------------- the loop

    def pop_next(self) -> str | None:
        """Take the next job in queue order, or None when done. The order is re-evaluated
        after every pick: the picked job's queue and its ancestors are computed afresh.

        At rest, a project's next job that asks no more than the one just taken is next:
        its key, and its ancestors' keys with it, can only be smaller (a queue's key grows
        with the request), and every other subtree's key stands, so the walk is skipped."""
        key = self._next_in_run()
        if key is None:
            key = self._best_among(self.s.problem.top)
        if key is not None:
            queue = self.s.problem.jobs[key].queue
            heapq.heappop(self.heaps[queue])
            self.forget(queue)
            if self.at_rest:
                job = self.s.problem.jobs[key]
                self._run = (queue, self.chunk(job) * job.gpus)
        return key

    def _next_in_run(self) -> str | None:
        if self._run is None:
            return None
        queue, request = self._run
        heap = self.heaps.get(queue)
        if not heap:
            return None
        job = self.s.problem.jobs[heap[0][1]]
        return job.key if self.chunk(job) * job.gpus <= request else None

    def run(self) -> None:
        """Allocate in order. Placements only take room and add to allocations, so a job
        that cannot fit, or is over a limit, stays so for the rest of the pass: such a job
        is not bin-packed, and once a run of misses finds that no job left could be placed,
        the rest get their reasons without walking the order (whatever its order, nothing
        more would be placed)."""
        if not self._any_placeable():  # a full cluster: nothing is placed, whatever the order
            self.none_placeable = True
            self.give_reasons()
            return
        jobs = self.s.problem.jobs
        misses, check_at = 0, _FIRST_CHECK
        while (key := self.pop_next()) is not None:
            job = jobs[key]
            placed = len(self.s.tasks.get(key, []))
            count = self.chunk(job)
            reason = self.check_limits(job, count * job.gpus)
            if reason is None:
                if could_fit(self.s, job, count):
                    reason = self._place(job, count)
                else:
                    reason = self._why_unplaced(job, self.s.pools_for(job), count)
            if reason is None:
                self._run = None  # placed: the keys along its chain grew
                misses, check_at = 0, _FIRST_CHECK
                if len(self.s.tasks[key]) < job.replicas:
                    self._push(job, len(self.s.tasks[key]))
                continue
            if placed < job.min_replicas:
                self.pending[key] = reason
            misses += 1
            if misses >= check_at:
                check_at *= 2  # checks cost the jobs left: fewer of them as misses go on
                if not self._any_placeable():
                    self.give_reasons()
                    return

    def _any_placeable(self) -> bool:
        """Whether any job left in the order could still be placed: within its limits, and
        room for it."""
        s, jobs = self.s, self.s.problem.jobs
        # nothing changes meanwhile: jobs of one project asking the same in the same pools
        # get the same answer, worked out once (per-GPU-type quotas look at more)
        seen: set[tuple[object, ...]] = set()
        for heap in self.heaps.values():
            for _, key in heap:
                job, count = jobs[key], self.chunk(jobs[key])
                if not s.per_type:
                    shape = (job.queue, job.preemptible, job.gpus, count, tuple(s.pools_for(job)))
                    if shape in seen:
                        continue
                    seen.add(shape)
                if within_limits(s, job, count * job.gpus) and could_fit(s, job, count):
                    return True
        return False

    def give_reasons(self) -> None:
        """Nothing left in the order can be placed: say why each waits, in name order.
        Nothing changes meanwhile, so jobs of one project asking the same in the same
        pools wait for the same reason, worked out once."""
        jobs = self.s.problem.jobs
        left = sorted(k for heap in self.heaps.values() for _, k in heap)
        known: dict[tuple[object, ...], Reason] = {}
        for key in left:
            job = jobs[key]
            if len(self.s.tasks.get(key, [])) >= job.min_replicas:
                continue  # running with its minimum: it does not wait
            count = self.chunk(job)
            pools = self.s.pools_for(job)
            shape = (job.queue, job.preemptible, job.gpus, count, tuple(pools))
            reason = known.get(shape)
            if reason is None:
                reason = self.check_limits(job, count * job.gpus) or self._why_unplaced(
                    job, pools, count
                )
                known[shape] = reason
            self.pending[key] = reason
        self.heaps.clear()
        self._cache.clear()

    def check_limits(self, job: JobRequest, gpus: int) -> Reason | None:
        """The hard caps: limits on every level, deserved for non-preemptible work."""
        return check_limits(self.s, job, gpus)

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
        s = self.s
        q = s.problem.queues[job.queue]
        grows = (len(s.tasks[job.key]), job.replicas) if job.running else None
        held_np = None if job.preemptible else s.alloc_np[q.id]
        return reasons.granted(
            q,
            s.alloc[q.id],
            s.fair.get(q.id, 0),
            grows=grows,
            held_np=held_np,
            cpu_only=job.gpus == 0,
            whole=not job.elastic,
        )

    def _why_unplaced(self, job: JobRequest, pools: list[PoolKey], count: int) -> Reason:
        total = largest = 0
        for p in pools:
            t, biggest = self.s.index.pool_free(p)
            total, largest = total + t, max(largest, biggest)
        why = reasons.no_room(
            count,
            job.gpus,
            pools,
            total,
            largest,
            gang_would_fit_in_total=total >= count * job.gpus,
            down=self.s.problem.out_of_service(pools),
        )
        reserved = self.s.index.reserved(pools, job.gpus, job.walltime)
        if reserved:  # nodes with the room whose maintenance it would run into
            windows = [(n.name, n.window) for n in reserved if n.window is not None]
            return reasons.reserved_nodes(why, windows, job.walltime)
        return why


def check_limits(s: Session, job: JobRequest, gpus: int) -> Reason | None:
    """The hard caps on ``gpus`` more for ``job``: limits on every level, deserved for
    non-preemptible work; the first one it would break, as the reason it waits."""
    found = _binding(s, job, gpus)
    if found is None:
        return None
    kind, q = found
    if q is not None and not job.preemptible:
        forever = reasons.beyond_deserved(s.chain(job.queue), gpus)
        if forever is not None:
            return reasons.non_preemptible_over_deserved(forever, s.alloc_np[forever.id], gpus)
    if q is None:
        return _type_quotas(s, job, gpus)
    if kind == "limit":
        return reasons.over_limit(q, s.alloc[q.id], gpus)
    return reasons.non_preemptible_over_deserved(q, s.alloc_np[q.id], gpus)


def within_limits(s: Session, job: JobRequest, gpus: int) -> bool:
    """Whether ``check_limits`` lets ``gpus`` more for ``job`` through (no reason built)."""
    return _binding(s, job, gpus) is None


def _binding(s: Session, job: JobRequest, gpus: int) -> tuple[str, Queue | None] | None:
    """The first hard cap ``gpus`` more for ``job`` would break: ("limit", queue),
    ("deserved", queue) for non-preemptible work, or ("type", None) when per-GPU-type
    quotas close every pool the job may use."""
    for q in s.chain(job.queue):
        if q.limit is not None and s.alloc[q.id] + gpus > q.limit:
            return ("limit", q)
    if not job.preemptible:
        for q in s.chain(job.queue):
            if s.alloc_np[q.id] + gpus > q.deserved:
                return ("deserved", q)
    if s.per_type:
        pools = s.pools_for(job)
        if pools and not s.typed_pools(job, pools, gpus):
            return ("type", None)
    return None


def _type_quotas(s: Session, job: JobRequest, gpus: int) -> Reason:
    """Per-GPU-type quotas close every pool the job may use: which ones, and how."""
    pools = s.pools_for(job)
    bindings = []
    for gpu_type in sorted({s.problem.pools[p].gpu_type for p in pools}):
        binding = s.over_type_quota(job, gpu_type, gpus)
        if binding is not None:
            bindings.append((gpu_type, *binding))
    return reasons.over_type_quota(gpus, bindings)


def allocate(session: Session, prefer: dict[str, list[str]] | None = None) -> Allocator:
    """Run the allocate step on ``session`` (mutating it); the result holds grants and reasons.

    ``prefer`` maps a job to nodes it should return to when they have room (see ``place``)."""
    allocator = Allocator(session, prefer=prefer, at_rest=True)
    allocator.run()
    return allocator


def could_fit(session: Session, job: JobRequest, count: int) -> bool:
    """Whether ``count`` replicas of ``job`` could still fit in the pools it may use, by free
    GPUs and the largest free block (a necessary condition: placements only take room)."""
    total, largest = pool_room(session, set(session.pools_for(job)))
    return total >= count * job.gpus and largest >= job.gpus


def pool_room(session: Session, pools: set[tuple[str, str]]) -> tuple[int, int]:
    """(free GPUs, largest free block on one node) over ``pools``."""
    total = largest = 0
    for p in pools:
        t, big = session.index.pool_free(p)
        total, largest = total + t, max(largest, big)
    return total, largest


def usage_wait(s: Session, job: JobRequest, reason: Reason) -> Reason:
    """A wait for room (either engine's) that the project's fair share explains: other work
    holds the GPUs, and the project may take none back (reclaim is for projects within their
    fair share); with its fair share as it would be without its past usage it could (the
    usage causes the wait), or not even then."""
    if reason.code is not ReasonCode.NO_CAPACITY or not job.preemptible:
        return reason
    q = s.problem.queues[job.queue]
    held, need, fair = s.alloc[q.id], job.min_replicas * job.gpus, s.fair.get(q.id, 0.0)
    if fair < held + need <= s.unbent_fair(q.id):
        return reasons.at_fair_share(reason, q, held, fair)
    if fair < held + need:  # and it would be without that usage too
        return reasons.beyond_fair_share(reason, q.kind, q.name, held + need, round(fair, 2))
    return reason
