"""Who may lose GPUs so that a waiting job starts: KAI's victim search, shared by every step.

Consolidation, reclaim and preempt differ only in their rules (which waiting job may act,
who may be a victim, which outcome is acceptable). The search is KAI's job solver, and
it lives here once:

1. The waiting job's gang is solved one task at a time; the victims that made room for
   the first k tasks are *recorded* and evicted again when solving task k + 1.
2. For each step, candidate victims come in *victim order* (:class:`VictimQueue`):
   queues in reverse queue order, jobs in reverse job order (lowest priority, then
   newest first). A gang victim loses all of its replicas; an elastic one loses one
   replica above its minimum at a time.
3. Victims accumulate one job at a time. After each addition, the accumulated victims on
   the node of the newest one are tried (each node of it, for a multi-node victim).
4. Every candidate set is verified by simulation (:func:`simulate`): evict it, then
   allocate the waiting job and the victims again in normal allocation order. The set
   is accepted only if the waiting job is placed and the step's rules accept the result.
   Victims placed again are moved; only the others are evicted.

Simulations run on the live session and are undone through a :class:`Trial`'s log (KAI's
statement with checkpoint and rollback), so a failed attempt costs what it changed, not a
copy of the cluster. Pure: the session is scratch state of one plan. The loop over waiting
jobs that calls :func:`solve`, and what a step records, live in solvers/disruption.py.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from solvers.allocate import Allocator, HeapEntry, job_order_key, next_chunk, place
from solvers.problem import JobRequest, Queue
from solvers.session import Session

PoolKey = tuple[str, str]


@dataclass(frozen=True)
class Chunk:
    """Replicas of one victim job that go together: a whole gang, or one elastic replica."""

    key: str
    nodes: tuple[str, ...]  # node keys, one per replica


class Trial:
    """Evictions and placements applied to the session with an undo log (KAI's statement)."""

    def __init__(self, session: Session) -> None:
        self.s = session
        # job, tasks before, pool before, GPUs given back (+) or taken (-) per node
        self._log: list[tuple[JobRequest, list[str] | None, PoolKey | None,
                              list[tuple[str, int]]]] = []
        self.before: dict[str, list[str]] = {}  # every touched job's replicas before the trial
        self.victims: list[Chunk] = []
        self.removed: dict[str, list[str]] = {}  # victim -> replicas evicted
        self.readded: dict[str, list[str]] = {}  # victim -> replicas placed again
        self.placed: list[str] = []  # the waiting job's new replicas

    def _remember(self, job: JobRequest) -> tuple[list[str] | None, PoolKey | None]:
        tasks = self.s.tasks.get(job.key)
        self.before.setdefault(job.key, list(tasks or []))
        return (list(tasks) if tasks is not None else None), self.s.pool.get(job.key)

    def evict(self, job: JobRequest, nodes: tuple[str, ...] | list[str]) -> None:
        tasks, pool = self._remember(job)
        left = list(tasks or [])
        for n in nodes:
            left.remove(n)
            self.s.index.give(n, job.gpus)
        self.s.tasks[job.key] = left
        self.s.charge(job, -len(nodes) * job.gpus)
        self._log.append((job, tasks, pool, [(n, job.gpus) for n in nodes]))

    def place(self, job: JobRequest, count: int) -> list[str] | None:
        tasks, pool = self._remember(job)
        nodes = place(self.s, job, count)
        if nodes is not None:
            self._log.append((job, tasks, pool, [(n, -job.gpus) for n in nodes]))
        return nodes

    def put(self, job: JobRequest, nodes: list[str]) -> None:
        """Place replicas on the given nodes (the caller checked that they fit)."""
        tasks, pool = self._remember(job)
        for n in nodes:
            self.s.index.take(n, job.gpus)
        self.s.tasks.setdefault(job.key, []).extend(nodes)
        self.s.charge(job, len(nodes) * job.gpus)
        self._log.append((job, tasks, pool, [(n, -job.gpus) for n in nodes]))

    def rollback(self) -> None:
        s = self.s
        for job, tasks, pool, moves in reversed(self._log):
            if tasks is None:
                s.tasks.pop(job.key, None)
            else:
                s.tasks[job.key] = tasks
            if pool is None:
                s.pool.pop(job.key, None)
            else:
                s.pool[job.key] = pool
            for node, gpus in moves:
                (s.index.take if gpus > 0 else s.index.give)(node, abs(gpus))
            s.charge(job, sum(g for _, g in moves))
        self._log.clear()

    def evicted_count(self, key: str) -> int:
        """Replicas of a victim that the simulation could not place again."""
        return len(self.removed.get(key, [])) - len(self.readded.get(key, []))


class _Desc:
    """Reverses an ordering key, so a min-heap hands out the *last* job in job order first."""

    __slots__ = ("key",)

    def __init__(self, key: tuple[object, ...]) -> None:
        self.key = key

    def __lt__(self, other: _Desc) -> bool:
        return other.key < self.key


class VictimQueue:
    """Candidate victims in KAI's victim order, handed out one chunk at a time.

    Queues come in reverse queue order, each queue's allocation reduced by the victims
    already taken from it plus its next candidate, so the most over-served or
    lowest-priority queue gives first. Inside a queue: reverse job order.
    """

    def __init__(self, session: Session, candidates: dict[str, list[str]]) -> None:
        self.s = session
        self.tasks = {k: list(v) for k, v in candidates.items() if v}
        self.heaps: dict[str, list[tuple[_Desc, str]]] = defaultdict(list)
        self.popped: dict[str, float] = defaultdict(float)  # GPUs handed out per project
        for key in sorted(self.tasks):
            self._push(key)

    def _push(self, key: str) -> None:
        job = self.s.problem.jobs[key]
        entry = (_Desc(job_order_key(job, len(self.tasks[key]))), key)
        heapq.heappush(self.heaps[job.queue], entry)

    def _leaf(self, qid: str) -> str | None:
        q = self.s.problem.queues[qid]
        if q.kind == "project":
            return qid if self.heaps.get(qid) else None
        return self._first(q.children)

    def _first(self, qids: list[str]) -> str | None:
        best: tuple[tuple[object, ...], str] | None = None
        for qid in qids:
            leaf = self._leaf(qid)
            if leaf is not None:
                key = self.victim_key(self.s.problem.queues[qid], leaf)
                if best is None or best[0] < key:
                    best = (key, leaf)
        return best[1] if best else None

    def victim_key(self, q: Queue, leaf: str) -> tuple[object, ...]:
        """Allocate's queue key, without a job and less the leaf's victims; largest first."""
        s = self.s
        head = self.heaps[leaf][0][1]
        removed = self.popped[leaf] + len(self.tasks[head]) * s.problem.jobs[head].gpus
        alloc = s.alloc[q.id]
        share = s.allocatable_share(q)
        if share > 0:
            with_victims, without = (alloc - removed) / share, alloc / share
        else:
            with_victims, without = (alloc - removed) * 1000, alloc * 1000
        return (0 if alloc <= q.deserved else 1, -q.priority, 1 if share == 0 and alloc > 0 else 0,
                with_victims, without, share, s.problem.order[q.id])

    def pop(self) -> Chunk | None:
        leaf = self._first(self.s.problem.top)
        if leaf is None:
            return None
        _, key = heapq.heappop(self.heaps[leaf])
        job = self.s.problem.jobs[key]
        tasks = self.tasks.pop(key)
        self.popped[leaf] += len(tasks) * job.gpus
        if len(tasks) > job.min_replicas:  # above its minimum: one replica, the rest later
            self.tasks[key] = tasks[:-1]
            self._push(key)
            return Chunk(key, (tasks[-1],))
        return Chunk(key, tuple(tasks))


class Context:
    """The other waiting jobs, in job order per project, built once per waiting job: in a
    simulation they only take their turn (KAI allocates the whole pending queue)."""

    def __init__(self, session: Session, keys: set[str]) -> None:
        self.s = session
        jobs = session.problem.jobs
        self.heaps: dict[str, list[HeapEntry]] = defaultdict(list)
        for key in keys:
            job = jobs[key]
            placed = len(session.tasks.get(key, []))
            self.heaps[job.queue].append((job_order_key(job, placed), key))
        for heap in self.heaps.values():
            heapq.heapify(heap)
        self.top = {qid: session.chain(qid)[-1].id for qid in self.heaps}

    def heaps_for(self, queues: set[str], leave_out: set[str]) -> dict[str, list[HeapEntry]]:
        """Fresh heaps of the waiting jobs under the top-level queues of ``queues``: jobs under
        another top-level queue cannot change the order among those (their turns change
        nothing, and no comparison involves them)."""
        tops = {self.s.chain(q)[-1].id for q in queues}
        out = {}
        for qid, heap in self.heaps.items():
            if self.top[qid] in tops:
                out[qid] = list(heap)
                if any(key in leave_out for _, key in heap):
                    out[qid] = [e for e in heap if e[1] not in leave_out]
                    heapq.heapify(out[qid])
        return out


def simulate(session: Session, job: JobRequest, count: int, victims: list[Chunk],
             context: Context) -> Trial | None:
    """Evict ``victims``, then allocate ``count`` replicas of ``job`` and the victims again in
    normal allocation order (the other waiting jobs in ``context`` only take their turn).
    Returns the applied trial if ``job`` was placed, else undoes everything and returns None."""
    s, jobs = session, session.problem.jobs
    trial = Trial(s)
    trial.victims = list(victims)
    removed: dict[str, list[str]] = defaultdict(list)
    for c in victims:
        trial.evict(jobs[c.key], c.nodes)
        removed[c.key].extend(c.nodes)
    trial.removed = dict(removed)
    # a victim asks for what it lost, as one gang if it fell below its minimum
    counts = {k: min(len(n), next_chunk(jobs[k], len(s.tasks.get(k, []))))
              for k, n in removed.items()}
    counts[job.key] = count
    todo = set(removed) | {job.key}
    heaps = context.heaps_for({jobs[k].queue for k in todo}, todo)
    order = Allocator(s, keys=todo, counts=counts, heaps=heaps)
    while todo and (key := order.pop_next()) is not None:
        if key not in todo:
            continue  # another waiting job: it only takes its turn
        todo.discard(key)
        want = jobs[key]
        fits = order.check_limits(want, counts[key] * want.gpus) is None
        nodes = trial.place(want, counts[key]) if fits else None
        if key == job.key:
            if nodes is None:
                trial.rollback()
                return None
            trial.placed = nodes
        elif nodes is not None:
            trial.readded[key] = nodes
    if not trial.placed:
        trial.rollback()
        return None
    return trial


def room_for(session: Session, job: JobRequest, count: int, victims: list[Chunk]) -> bool:
    """Cheap necessary condition before a simulation: enough GPUs free or freed in the job's
    pools, and one node with room for a replica (KAI's idle-GPU scenario filters)."""
    s = session
    pools = {s.pool[job.key]} if job.key in s.pool else set(job.pools)
    freed: Counter[str] = Counter()
    for c in victims:
        for n in c.nodes:
            if s.index.pool_of.get(n) in pools:
                freed[n] += s.problem.jobs[c.key].gpus
    total = largest = 0
    for p in pools:
        t, big = s.index.pool_free(p)
        total, largest = total + t, max(largest, big)
    largest = max([largest] + [s.index.free[n] + g for n, g in freed.items()])
    return total + sum(freed.values()) >= count * job.gpus and largest >= job.gpus


def scenarios(potential: list[Chunk]) -> Iterator[list[int]]:
    """Candidate sets after the newest victim joined: for each node of the newest victim,
    the accumulated victims with a replica there (whole jobs). A task lands on one node,
    so KAI never evicts victims elsewhere to make room for it."""
    latest = potential[-1]
    for node in sorted(set(latest.nodes)):
        keys = {c.key for c in potential if node in c.nodes}
        yield [i for i, c in enumerate(potential) if c.key in keys]


Accept = Callable[[JobRequest, int, Trial], bool]  # a step's verdict on a simulated outcome


class Budget:
    """Simulations a search may still run, within an outer budget if given. KAI's later
    versions bound the same search by time; a count keeps plans deterministic."""

    def __init__(self, simulations: int, within: Budget | None = None) -> None:
        self.left = simulations
        self.within = within

    @property
    def exhausted(self) -> bool:
        return self.left <= 0 or (self.within is not None and self.within.exhausted)

    def spend(self) -> bool:
        if self.exhausted:
            return False
        self.left -= 1
        if self.within is not None:
            self.within.spend()
        return True


def solve(session: Session, job: JobRequest, count: int, candidates: dict[str, list[str]],
          context: Context, accept: Accept, budget: Budget) -> Trial | None:
    """KAI's job solver: place ``count`` replicas one task at a time, keeping the victims
    that made room for the earlier tasks. Returns the applied trial of the whole gang.

    ``candidates`` maps each possible victim to the replicas it may lose; ``context`` holds
    the other waiting jobs (they only shape the allocation order of a simulation)."""
    recorded: list[Chunk] = []
    for k in range(1, count + 1):
        trial = _solve_tasks(session, job, k, recorded, candidates, context, accept, budget)
        if trial is None:
            return None
        if k == count:
            return trial
        recorded = trial.victims
        trial.rollback()
    return None


def _solve_tasks(session: Session, job: JobRequest, k: int, recorded: list[Chunk],
                 candidates: dict[str, list[str]], context: Context, accept: Accept,
                 budget: Budget) -> Trial | None:
    def attempt(victims: list[Chunk]) -> Trial | None:
        if not room_for(session, job, k, victims) or not budget.spend():
            return None
        trial = simulate(session, job, k, victims, context)
        if trial is not None and not accept(job, k, trial):
            trial.rollback()
            return None
        return trial

    if recorded and (trial := attempt(recorded)) is not None:
        return trial
    left = {key: list(nodes) for key, nodes in candidates.items()}
    for c in recorded:  # recorded victims are evicted anyway: never offered twice
        for n in c.nodes:
            left[c.key].remove(n)
    queue = VictimQueue(session, left)
    potential: list[Chunk] = []
    tried: set[tuple[int, ...]] = set()
    while not budget.exhausted and (chunk := queue.pop()) is not None:
        potential.append(chunk)
        for ids in scenarios(potential):
            if tuple(ids) not in tried:
                tried.add(tuple(ids))
                if (trial := attempt(recorded + [potential[i] for i in ids])) is not None:
                    return trial
    return None
