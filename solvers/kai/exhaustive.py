"""The victim search as it was first written, kept for comparison (``Policy.search``).

Same rules and same answers as the indexed search (solvers/kai/victims.py), without its
indexes: every waiting job collects and sorts every running job as candidates, and every
simulation replays the whole waiting queue in allocation order, popping each job in
turn. ``benchmarks/plan.py`` runs both on one input to show the difference, and the
property tests check that both give the same plans.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from typing import TYPE_CHECKING

from solvers.kai.allocate import Allocator, HeapEntry, next_chunk, within_limits
from solvers.kai.victims import Accept, SimulationBudget, room_for, scenarios
from solvers.order import QueueKey, VictimOrder, job_order, victim_queue_order
from solvers.problem import JobRequest, Queue
from solvers.session import Chunk, Session, Statement

if TYPE_CHECKING:
    from solvers.kai.disruption import Disruption


def run_exhaustive(step: Disruption) -> None:
    """The step's loop over waiting jobs, candidates and context rebuilt for every job."""
    s, jobs = step.s, step.s.problem.jobs
    order = Allocator(s, keys=step._waiting())
    failed: set[tuple[object, ...]] = set()
    holders: dict[str, list[str]] = {}
    again: set[str] = set()
    while (key := order.pop_next()) is not None:
        job = jobs[key]
        count = step.count = order.chunk(job)
        step.base_alloc = defaultdict(float, s.alloc)
        step.base_np = defaultdict(float, s.alloc_np)
        step.base_alloc_t = defaultdict(float, s.alloc_t)
        if (key in step.ledger.touched and key not in again) or not step.admits(job, count):
            continue
        shape = step._shape(job, count)
        if shape is not None and shape in failed:
            continue
        if step.stop():
            break
        candidates = _candidates(step, job, holders)
        trial = None
        if candidates:
            trial = solve(
                s,
                job,
                count,
                candidates,
                Context(s, step._waiting() - {key}),
                step._accept,
                SimulationBudget(step.job_budget, within=step.budget),
            )
        if trial is None:
            if shape is not None:
                failed.add(shape)
            continue
        step._commit(job, count, trial)
        if step.retry_twins:
            failed.clear()
        step.ask_again(order, job, again)
        holders.clear()
        order.forget()  # victims left many queues: recompute the whole order


def _candidates(
    step: Disruption, job: JobRequest, holders: dict[str, list[str]]
) -> dict[str, list[str]]:
    s, jobs = step.s, step.s.problem.jobs
    if not holders:
        for key in sorted(s.tasks):
            holders.setdefault(jobs[key].queue, []).append(key)
    queues = step.victim_queues(job)
    keys = [
        k for q in (queues if queues is not None else sorted(holders)) for k in holders.get(q, [])
    ]
    pools = set(s.pools_for(job))
    out = {}
    for key in keys:
        victim, tasks = jobs[key], s.tasks[key]
        if not tasks or key == job.key or not victim.evictable:
            continue
        if s.pool.get(key) not in pools or any(n not in s.index.pool_of for n in tasks):
            continue
        if step.min_runtime_protects and step.protected(victim) and not victim.elastic:
            continue
        if step.may_evict(job, victim):
            out[key] = list(tasks)
    return out


class VictimQueue:
    """Candidate victims in KAI's victim order, handed out one chunk at a time (every
    candidate pushed up front, the whole tree walked on every pop)."""

    def __init__(self, session: Session, candidates: dict[str, list[str]]) -> None:
        self.s = session
        self.tasks = {k: list(v) for k, v in candidates.items() if v}
        self.heaps: dict[str, list[tuple[VictimOrder, str]]] = defaultdict(list)
        self.popped: dict[str, float] = defaultdict(float)  # GPUs handed out per project
        for key in sorted(self.tasks):
            self._push(key)

    def _push(self, key: str) -> None:
        job = self.s.problem.jobs[key]
        entry = (VictimOrder(job, len(self.tasks[key])), key)
        heapq.heappush(self.heaps[job.queue], entry)

    def _leaf(self, qid: str) -> str | None:
        q = self.s.problem.queues[qid]
        if q.kind == "project":
            return qid if self.heaps.get(qid) else None
        return self._first(q.children)

    def _first(self, qids: list[str]) -> str | None:
        best: tuple[QueueKey, str] | None = None
        for qid in qids:
            leaf = self._leaf(qid)
            if leaf is not None:
                key = self.victim_key(self.s.problem.queues[qid], leaf)
                if best is None or best[0] < key:
                    best = (key, leaf)
        return best[1] if best else None

    def victim_key(self, q: Queue, leaf: str) -> QueueKey:
        s = self.s
        head = self.heaps[leaf][0][1]
        taken = self.popped[leaf] + len(self.tasks[head]) * s.problem.jobs[head].gpus
        return victim_queue_order(
            q,
            allocated=s.seen(q.id),
            taken=taken,
            share=s.allocatable_share(q),
            rank=s.problem.order[q.id],
        )

    def pop(self) -> Chunk | None:
        leaf = self._first(self.s.problem.top)
        if leaf is None:
            return None
        _, key = heapq.heappop(self.heaps[leaf])
        job = self.s.problem.jobs[key]
        tasks = self.tasks.pop(key)
        self.popped[leaf] += len(tasks) * job.gpus
        if len(tasks) > job.min_replicas:
            self.tasks[key] = tasks[:-1]
            self._push(key)
            return Chunk(key, (tasks[-1],))
        return Chunk(key, tuple(tasks))


class Context:
    """The other waiting jobs, in job order per project, built once per waiting job."""

    def __init__(self, session: Session, keys: set[str]) -> None:
        self.s = session
        jobs = session.problem.jobs
        self.heaps: dict[str, list[HeapEntry]] = defaultdict(list)
        for key in keys:
            job = jobs[key]
            placed = len(session.tasks.get(key, []))
            self.heaps[job.queue].append((job_order(job, placed), key))
        for heap in self.heaps.values():
            heapq.heapify(heap)
        self.top = {qid: session.chain(qid)[-1].id for qid in self.heaps}

    def heaps_for(self, queues: set[str], leave_out: set[str]) -> dict[str, list[HeapEntry]]:
        """Fresh heaps of the waiting jobs under the top-level queues of ``queues``."""
        tops = {self.s.chain(q)[-1].id for q in queues}
        out = {}
        for qid, heap in self.heaps.items():
            if self.top[qid] in tops:
                out[qid] = list(heap)
                if any(key in leave_out for _, key in heap):
                    out[qid] = [e for e in heap if e[1] not in leave_out]
                    heapq.heapify(out[qid])
        return out


def simulate(
    session: Session, job: JobRequest, count: int, victims: list[Chunk], context: Context
) -> Statement | None:
    """Evict ``victims``, then allocate the job and the victims again by popping every
    waiting job in allocation order (the others only take their turn)."""
    s, jobs = session, session.problem.jobs
    trial = Statement(s)
    trial.victims = list(victims)
    removed: dict[str, list[str]] = defaultdict(list)
    for c in victims:
        trial.evict(jobs[c.key], c.nodes)
        removed[c.key].extend(c.nodes)
    trial.removed = dict(removed)
    counts = {
        k: min(len(n), next_chunk(jobs[k], len(s.tasks.get(k, [])))) for k, n in removed.items()
    }
    counts[job.key] = count
    todo = set(removed) | {job.key}
    heaps = context.heaps_for({jobs[k].queue for k in todo}, todo)
    order = Allocator(s, keys=todo, counts=counts, heaps=heaps)
    while todo and (key := order.pop_next()) is not None:
        if key not in todo:
            continue  # another waiting job: it only takes its turn
        todo.discard(key)
        want = jobs[key]
        fits = within_limits(s, want, counts[key] * want.gpus)
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


def solve(
    session: Session,
    job: JobRequest,
    count: int,
    candidates: dict[str, list[str]],
    context: Context,
    accept: Accept,
    budget: SimulationBudget,
) -> Statement | None:
    """KAI's job solver: place ``count`` replicas one task at a time, keeping the victims
    that made room for the earlier tasks."""
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


def _solve_tasks(
    session: Session,
    job: JobRequest,
    k: int,
    recorded: list[Chunk],
    candidates: dict[str, list[str]],
    context: Context,
    accept: Accept,
    budget: SimulationBudget,
) -> Statement | None:
    def attempt(victims: list[Chunk]) -> Statement | None:
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
    for c in recorded:
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
