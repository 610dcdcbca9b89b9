"""Who may lose GPUs, indexed once per step: running work by project in victim order.

KAI's victim search (solvers/kai/victims.py) takes candidates one at a time in *victim
order*: queues in reverse queue order (the most over-served gives first), jobs inside a
queue in reverse job order (lowest priority, then newest, first). Collecting and sorting
every running job for every waiting job made the search cost the size of the cluster
each time. Here the running jobs that could ever be victims in a step (preemptible,
on schedulable nodes, not shielded by minRuntime) are kept per project, sorted in victim
order (:class:`Holders`, updated as the step commits), and a :class:`VictimQueue` walks
them lazily, skipping those the waiting job may not take (another pool, or the step's
rules say no), with each subtree's turn cached until a victim leaves it.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from datetime import timedelta

from sortedcontainers import SortedList

from solvers.order import QueueKey, VictimOrder, victim_queue_keys
from solvers.problem import JobRequest, PoolKey, Queue
from solvers.session import Chunk, Session


def protected(session: Session, victim: JobRequest) -> bool:
    """Started less than its project's minRuntime ago."""
    if not victim.min_runtime or victim.started_at is None:
        return False
    return victim.started_at + timedelta(seconds=victim.min_runtime) > session.problem.now


class Holders:
    """Running jobs that may be victims in this step, per project in victim order (per pool
    and in all pools at once), and the GPUs they hold per pool and project, and in all."""

    def __init__(self, session: Session, shields: bool) -> None:
        self.s = session
        self.shields = shields  # minRuntime shields a young gang (reclaim, preempt)
        # (project, pool) -> its candidates in victim order
        self.lists: dict[tuple[str, PoolKey], SortedList] = defaultdict(SortedList)
        # project -> all its candidates in victim order, and how many it has in each pool
        self.everywhere: dict[str, SortedList] = defaultdict(SortedList)
        self.in_pool: dict[str, Counter[PoolKey]] = defaultdict(Counter)
        self.gpus: dict[PoolKey, Counter[str]] = defaultdict(Counter)  # pool -> project -> GPUs
        self.total: Counter[str] = Counter()  # project -> GPUs, in every pool
        self.pool_count: Counter[PoolKey] = Counter()  # candidates per pool
        self.sizes: dict[str, Counter[float]] = defaultdict(Counter)  # GPUs each job holds
        # (project, pool) -> GPUs its candidates hold per job priority
        self.by_priority: dict[tuple[str, PoolKey], Counter[int]] = defaultdict(Counter)
        # job -> (its entry in its project's list, pool, replicas held)
        self._entry: dict[str, tuple[tuple[VictimOrder, str], PoolKey, int]] = {}
        for key in sorted(session.tasks):
            self.update(key)

    def __contains__(self, key: str) -> bool:
        return key in self._entry

    def update(self, key: str) -> None:
        """The job's replicas changed (a commit): move or drop its entry."""
        s, job = self.s, self.s.problem.jobs[key]
        old = self._entry.pop(key, None)
        if old is not None:
            self.lists[job.queue, old[1]].remove(old[0])
            self.everywhere[job.queue].remove(old[0])
            self.in_pool[job.queue][old[1]] -= 1
            self.gpus[old[1]][job.queue] -= old[2] * job.gpus
            self.total[job.queue] -= old[2] * job.gpus
            self.pool_count[old[1]] -= 1
            self.sizes[job.queue][old[2] * job.gpus] -= 1
            self.by_priority[job.queue, old[1]][job.priority] -= old[2] * job.gpus
        tasks = s.tasks.get(key, [])
        pool = s.pool.get(key)
        if (
            not tasks
            or pool is None
            or not job.evictable  # not preemptible, on its way out, or its eviction failed
            or any(n not in s.index.pool_of for n in tasks)
            # a shielded gang is no victim; a shielded elastic job may still shrink
            or (self.shields and protected(s, job) and not job.elastic)
        ):
            return
        entry = (VictimOrder(job, len(tasks)), key)
        self._entry[key] = (entry, pool, len(tasks))
        self.lists[job.queue, pool].add(entry)
        self.everywhere[job.queue].add(entry)
        self.in_pool[job.queue][pool] += 1
        self.gpus[pool][job.queue] += len(tasks) * job.gpus
        self.total[job.queue] += len(tasks) * job.gpus
        self.pool_count[pool] += 1
        self.sizes[job.queue][len(tasks) * job.gpus] += 1
        self.by_priority[job.queue, pool][job.priority] += len(tasks) * job.gpus

    def held(self, pools: set[PoolKey], project_ok: Callable[[str], bool]) -> dict[str, float]:
        """GPUs the candidates hold in ``pools``, per project ``project_ok`` accepts."""
        held: dict[str, float] = defaultdict(float)
        if all(p in pools for p, n in self.pool_count.items() if n > 0):
            for qid, gpus in self.total.items():  # every pool with candidates: sums kept
                if gpus > 0 and project_ok(qid):
                    held[qid] = gpus
            return held
        for pool in pools:
            for qid, gpus in self.gpus.get(pool, {}).items():
                if gpus > 0 and project_ok(qid):
                    held[qid] += gpus
        return held

    def below(self, qid: str, pools: set[PoolKey], priority: int) -> float:
        """GPUs the project's candidates of a lower priority hold in ``pools``."""
        return sum(
            gpus
            for pool in pools
            for p, gpus in self.by_priority.get((qid, pool), Counter()).items()
            if p < priority
        )

    def largest(self, qid: str) -> float:
        """The most GPUs one candidate of the project holds."""
        return max((g for g, n in self.sizes[qid].items() if n > 0), default=0.0)

    def largest_under(self, q: Queue) -> float:
        """The most GPUs one candidate of any project under ``q`` (or ``q`` itself) holds."""
        if q.kind == "project":
            return self.largest(q.id)
        queues = self.s.problem.queues
        return max((self.largest_under(queues[c]) for c in q.children), default=0.0)


# a step's test of victims for one waiting job (Disruption.victim_filter): may it take
# from this project at all, and this running job of one (None: any job of it)
VictimFilter = tuple[Callable[[str], bool], Callable[[str], bool] | None]


class VictimQueue:
    """Candidate victims of one search in KAI's victim order, one chunk at a time.

    Queues come in reverse queue order, each with its allocation reduced by the victims
    already taken from it plus its next candidate (a department's by those of the project
    that leads it: KAI too compares a queue by its best leaf's victims); inside a queue,
    reverse job order. A gang victim comes whole; an elastic one gives one replica above
    its minimum at a time and comes back with the rest. ``allowed`` says whether the
    waiting job may take from a project at all, and a running job of one it may;
    ``recorded`` victims (taken for the gang's earlier tasks) are offered only with what
    they have left.
    """

    def __init__(
        self,
        session: Session,
        holders: Holders,
        pools: set[PoolKey],
        allowed: VictimFilter,
        recorded: list[Chunk],
    ) -> None:
        self.s = session
        self.holders = holders
        self.pools = pools
        self.project_ok, self.job_ok = allowed
        self.pool_list = sorted(pools)
        # where each (project, pool) list (or (project, None): all its pools) is read, its
        # next candidate, each project's next
        self._reading: dict[tuple[str, PoolKey | None], Iterator[tuple[VictimOrder, str]]] = {}
        self._next: dict[tuple[str, PoolKey | None], tuple[VictimOrder, str] | None] = {}
        self._heads: dict[str, tuple[VictimOrder, str] | None] = {}
        self.extra: dict[str, list[tuple[VictimOrder, str]]] = defaultdict(list)
        self.left: dict[str, list[str]] = {}  # replicas still offered, once a job is touched
        self.popped: dict[str, float] = defaultdict(float)  # GPUs handed out per project
        self._entry: dict[str, tuple[QueueKey, str] | None] = {}
        # the lists a project's candidates are read from: its pools holding any that the
        # job may use, or (None) all of them at once where the job may use all those pools
        self._pools_of: dict[str, list[PoolKey | None]] = {}
        self._keys: dict[str, Callable[[float], QueueKey]] = {}  # its key, given what it gave
        self._taken: dict[str, float] = {}  # per project: popped + its next candidate's GPUs
        self._opened: dict[str, bool] = {}  # project_ok's verdicts (fixed while it runs)
        jobs = session.problem.jobs
        for c in recorded:
            left = self.left.setdefault(c.key, list(session.tasks.get(c.key, [])))
            for n in c.nodes:
                left.remove(n)
        for key, tasks in sorted(self.left.items()):
            if tasks and key in holders and self._open(jobs[key].queue) and self._may(key):
                job = jobs[key]
                heapq.heappush(self.extra[job.queue], (VictimOrder(job, len(tasks)), key))

    def _may(self, key: str) -> bool:
        job_ok = self.job_ok
        return self.s.pool.get(key) in self.pools and (job_ok is None or job_ok(key))

    def _open(self, qid: str) -> bool:
        known = self._opened.get(qid)
        if known is None:
            known = self._opened[qid] = self.project_ok(qid)
        return known

    def _head(self, qid: str) -> tuple[VictimOrder, str] | None:
        """The next candidate of a project: its next static entry (over the pools the
        waiting job may use) or a job come back with replicas left."""
        if qid in self._heads:
            return self._heads[qid]
        best: tuple[VictimOrder, str] | None = None
        pools = self._pools_of.get(qid)
        if pools is None:
            pools = self._pools_of[qid] = self._lists_of(qid)
        for pool in pools:
            entry = self._static(qid, pool)
            if entry is not None and (best is None or entry[0] < best[0]):
                best = entry
        extra = self.extra[qid][0] if self.extra.get(qid) else None
        if best is None or (extra is not None and extra[0] < best[0]):
            best = extra
        self._heads[qid] = best
        return best

    def _lists_of(self, qid: str) -> list[PoolKey | None]:
        held = [p for p, n in self.holders.in_pool.get(qid, Counter()).items() if n > 0]
        if all(p in self.pools for p in held):
            return [None] if held else []
        lists = self.holders.lists
        return [p for p in self.pool_list if lists.get((qid, p))]

    def _static(self, qid: str, pool: PoolKey | None) -> tuple[VictimOrder, str] | None:
        """The next candidate the waiting job may take from a (project, pool) list, or
        from all the project's candidates (``pool`` None)."""
        at = (qid, pool)
        if at in self._next:
            return self._next[at]
        reading = self._reading.get(at)
        if reading is None:
            holders = self.holders
            entries = (
                holders.everywhere.get(qid) if pool is None else holders.lists.get((qid, pool))
            )
            reading = self._reading[at] = iter(entries if entries is not None else ())
        found, left, job_ok = None, self.left, self.job_ok
        for entry in reading:
            if entry[1] not in left and (job_ok is None or job_ok(entry[1])):
                found = entry
                break
        self._next[at] = found
        return found

    def _tasks(self, key: str) -> list[str]:
        return self.left[key] if key in self.left else self.s.tasks[key]

    def _subtree(self, q: Queue) -> None:
        """Work out the turn of every subtree below ``q``, then its own (the first pop);
        later pops keep them up to date along the popped project's chain."""
        if q.kind != "project":
            queues = self.s.problem.queues
            for child in q.children:
                self._subtree(queues[child])
        self._compute(q)

    def _compute(self, q: Queue) -> None:
        """(the subtree's key at its parent, the project whose candidate it offers next)."""
        qid = q.id
        leaf: str | None = None
        if q.kind == "project":
            if self._open(qid) and self._head(qid) is not None:
                leaf = qid
        else:  # the child whose key is largest (siblings' keys never tie: rank is in them)
            found = max(filter(None, map(self._entry.__getitem__, q.children)), default=None)
            leaf = found[1] if found is not None else None
        self._entry[qid] = (self._victim_key(qid, leaf), leaf) if leaf is not None else None

    def _victim_key(self, qid: str, leaf: str) -> QueueKey:
        taken = self._taken.get(leaf)
        if taken is None:  # what the project gave so far and its next candidate holds
            head = self._head(leaf)
            assert head is not None
            job = self.s.problem.jobs[head[1]]
            taken = self._taken[leaf] = self.popped[leaf] + len(self._tasks(head[1])) * job.gpus
        key = self._keys.get(qid)
        if key is None:  # fixed while the search runs (the session is at rest)
            s, q = self.s, self.s.problem.queues[qid]
            key = self._keys[qid] = victim_queue_keys(
                q, allocated=s.seen(qid), share=s.allocatable_share(q), rank=s.problem.order[qid]
            )
        return key(taken)

    def pop(self) -> Chunk | None:
        entries, queues = self._entry, self.s.problem.queues
        if not entries:
            for top in self.s.problem.top:
                self._subtree(queues[top])
        # the top queue whose key is largest (keys never tie: rank is in them)
        best = max(filter(None, map(entries.__getitem__, self.s.problem.top)), default=None)
        if best is None:
            return None
        leaf = best[1]
        head = self._head(leaf)
        assert head is not None
        key = head[1]
        if self.extra.get(leaf) and self.extra[leaf][0] is head:
            heapq.heappop(self.extra[leaf])
        else:
            whole = self._pools_of[leaf] == [None]
            del self._next[leaf, None if whole else self.s.pool[key]]
        self._heads.pop(leaf, None)
        self._taken.pop(leaf, None)
        job = self.s.problem.jobs[key]
        tasks = list(self._tasks(key))
        self.popped[leaf] += len(tasks) * job.gpus
        if len(tasks) > job.min_replicas:  # above its minimum: one replica, the rest later
            self.left[key] = tasks[:-1]
            heapq.heappush(self.extra[leaf], (VictimOrder(job, len(tasks) - 1), key))
            chunk = Chunk(key, (tasks[-1],))
        else:
            self.left[key] = []
            chunk = Chunk(key, tuple(tasks))
        for q in self.s.chain(leaf):  # the subtrees above it change their turn
            self._compute(q)
        return chunk
