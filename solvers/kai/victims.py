"""Who may lose GPUs so that a waiting job starts: KAI's victim search, shared by every step.

Consolidation, reclaim and preempt differ only in their rules (which waiting job may act,
who may be a victim, which outcome is acceptable). The search is KAI's job solver, and
it lives here once:

1. The waiting job's gang is solved one task at a time; the victims that made room for
   the first k tasks are *recorded* and evicted again when solving task k + 1.
2. For each step, candidate victims come in *victim order* (solvers/kai/candidates.py):
   queues in reverse queue order, jobs in reverse job order (lowest priority, then
   newest first). A gang victim loses all of its replicas; an elastic one loses one
   replica above its minimum at a time.
3. Victims accumulate one job at a time. After each addition, the accumulated victims on
   the node of the newest one are tried (each node of it, for a multi-node victim).
4. Every candidate set is verified by simulation (:meth:`Search.simulate`): evict it, then
   allocate the waiting job and the victims again in normal allocation order, the other
   waiting jobs taking their turns (solvers/kai/turns.py). The set is accepted only if
   the waiting job is placed and the step's rules accept the result. Victims placed
   again are moved; only the others are evicted.

What makes it cheap at thousands of nodes, without changing an answer: the running jobs
and the waiting ones are indexed once per step and kept up to date as the step commits
(not collected again for every waiting job; the next step takes them over where they
still hold), the simulation's order is computed from a
few runs per queue (not by popping every waiting job), and a candidate set, or a whole
search, is skipped when the GPUs it could ever free cannot hold the job (the step's
``most_taken``; solvers/kai/reclaim.py), a node's set without even being built when the
sides of the victims there could not give enough (:class:`NodeBound`). Simulations run on
the live session and are undone through a :class:`~solvers.session.Statement`'s log
(KAI's statement: apply, then roll back), so a failed attempt costs what it changed, not
a copy of the cluster.
The loop over waiting jobs that calls :meth:`Search.solve`, and what a step records,
live in solvers/kai/disruption.py; the search as first written (no indexes), kept for
comparison, in solvers/kai/exhaustive.py.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from solvers.kai.allocate import could_fit, next_chunk, pool_room, within_limits
from solvers.kai.candidates import Holders, VictimFilter, VictimQueue
from solvers.kai.turns import StaticRuns, Turns
from solvers.kai.waiting import WaitingIndex
from solvers.order import JobKey, job_order
from solvers.problem import JobRequest
from solvers.session import Chunk, Session, Statement

if TYPE_CHECKING:
    from solvers.kai.disruption import Disruption, SideBound

Accept = Callable[[JobRequest, int, Statement], bool]  # a step's verdict on a simulated outcome


class SimulationBudget:
    """Simulations a search may still run, within an outer budget if given. KAI's later
    versions bound the same search by time; a count keeps plans deterministic."""

    def __init__(self, simulations: int, within: SimulationBudget | None = None) -> None:
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


def room_for(
    session: Session,
    job: JobRequest,
    count: int,
    victims: list[Chunk],
    free: tuple[int, int] | None = None,
) -> bool:
    """Cheap necessary condition before a simulation: enough GPUs free or freed in the job's
    pools, and one node with room for a replica (KAI's idle-GPU scenario filters).
    ``free``: the pools' (free GPUs, largest free block), when the caller knows them."""
    s = session
    pools = {s.pool[job.key]} if job.key in s.pool else set(job.pools)
    freed: Counter[str] = Counter()
    for c in victims:
        gpus = s.problem.jobs[c.key].gpus
        for n in c.nodes:
            if s.index.pool_of.get(n) in pools:
                freed[n] += gpus
    total, largest = free if free is not None else pool_room(s, pools)
    for n, g in freed.items():
        largest = max(largest, s.index.free[n] + g)
    return total + sum(freed.values()) >= count * job.gpus and largest >= job.gpus


def scenarios(potential: list[Chunk]) -> Iterator[list[int]]:
    """Candidate sets after the newest victim joined: for each node of the newest victim,
    the accumulated victims with a replica there (whole jobs). A task lands on one node,
    so KAI never evicts victims elsewhere to make room for it."""
    latest = potential[-1]
    for node in sorted(set(latest.nodes)):
        keys = {c.key for c in potential if node in c.nodes}
        yield [i for i, c in enumerate(potential) if c.key in keys]


class Potential:
    """The victims accumulated so far in one search, indexed by node and by job, so that the
    candidate sets of :func:`scenarios` cost what they hold, not the whole list."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        self.on_node: dict[str, set[str]] = defaultdict(set)  # node -> victims with a replica
        self.of_job: dict[str, list[int]] = defaultdict(list)  # victim -> its chunks

    def add(self, chunk: Chunk) -> None:
        """Add the newest victim (it opens the sets ``on`` each of its nodes)."""
        self.of_job[chunk.key].append(len(self.chunks))
        self.chunks.append(chunk)
        for node in chunk.nodes:
            self.on_node[node].add(chunk.key)

    def on(self, node: str) -> list[int]:
        """The candidate set on ``node`` (as :func:`scenarios`): every victim with a
        replica there, whole."""
        return sorted(i for key in self.on_node[node] for i in self.of_job[key])


class NodeBound:
    """What a bounded step's rules let the candidate set on each node give at most, kept up
    as victims accumulate (the step's :class:`~solvers.kai.disruption.SideBound`): a node
    whose set falls short even so is not tried. A node's set holds the recorded victims
    and every victim with a replica there (whole), so the sides of those bound it, given
    what they hold under the waiting job's own chain."""

    def __init__(
        self, session: Session, job: JobRequest, bound: SideBound, recorded: list[Chunk]
    ) -> None:
        self.s = session
        self.bound = bound
        self.mine = {q.id for q in session.chain(job.queue)}
        # GPUs under each queue of the job's chain: of the recorded victims, and of the
        # victims with a replica on each node
        self.inside: Counter[str] = Counter()
        self.inside_on: dict[str, Counter[str]] = defaultdict(Counter)
        self.sides_on: dict[str, dict[str, str]] = defaultdict(dict)  # node -> side -> project
        self.recorded: dict[str, str] = {}
        self._facts: dict[str, tuple[str, list[str]]] = {}  # project -> (side, chain above)
        self.chain = sorted(self.mine)
        # (project, GPUs held under each queue of the chain) -> its side's cap
        self._caps: dict[tuple[str, tuple[int, ...]], float] = {}
        jobs = session.problem.jobs
        for c in recorded:
            victim = jobs[c.key]
            side, under = self._of(victim.queue)
            self.recorded[side] = victim.queue
            for q in under:
                self.inside[q] += len(c.nodes) * victim.gpus

    def _of(self, qid: str) -> tuple[str, list[str]]:
        """A victim project's side, and the queues of the job's chain above it."""
        facts = self._facts.get(qid)
        if facts is None:
            under = [q.id for q in self.s.chain(qid) if q.id in self.mine]
            facts = self._facts[qid] = (self.bound.side(qid), under)
        return facts

    def add(self, chunk: Chunk) -> None:
        victim = self.s.problem.jobs[chunk.key]
        side, under = self._of(victim.queue)
        for n in chunk.nodes:
            self.sides_on[n][side] = victim.queue
        if under:
            gpus = len(chunk.nodes) * victim.gpus
            for n in set(self.s.tasks[chunk.key]):  # every set holding the victim, whole
                for q in under:
                    self.inside_on[n][q] += gpus

    def most(self, node: str) -> float:
        projects = self.sides_on[node].values()
        if self.recorded:
            projects = {**self.recorded, **self.sides_on[node]}.values()
        on = self.inside_on.get(node)
        # a side's cap depends on what the set holds under the job's chain only: worked out
        # once per project and such holding, as sets on many nodes hold alike
        held: tuple[int, ...] = ()
        if self.inside or on:
            held = tuple(self.inside[q] + (on[q] if on else 0) for q in self.chain)
        total = 0.0
        for qid in projects:
            cap = self._caps.get((qid, held))
            if cap is None:
                inside = dict(zip(self.chain, held, strict=False))  # held: () when nothing
                cap = self._caps[qid, held] = self.bound.cap(qid, inside)
            total += cap
        return total


@dataclass
class Indexes:
    """What a step's search leaves for the next step of the cycle: its candidate victims
    (:class:`Holders`, for the victims a minRuntime ``shields`` or not) and its waiting
    jobs in lanes (if it simulated), each kept up to date through every commit."""

    holders: Holders
    shields: bool
    waiting: WaitingIndex | None


class Search:
    """KAI's job solver for one disruptive step, over indexes kept for the whole step.

    The indexes of the cycle's previous step (``carried``) are taken over where they still
    describe the session: nothing but the steps' commits changes it between two steps,
    and the commits kept them up to date. Its candidates serve when a minRuntime shields
    the same victims; its lanes when they hold exactly this step's waiting jobs."""

    def __init__(self, step: Disruption, waiting: set[str], carried: Indexes | None = None) -> None:
        self.step = step
        self.s = step.s
        self.waiting = waiting
        self._carried_lanes = carried.waiting if carried is not None else None
        self._index: WaitingIndex | None = None  # built (or taken over) by the first simulation
        self._static: StaticRuns | None = None
        shields = step.min_runtime_protects
        if carried is not None and carried.shields == shields:
            self.holders = carried.holders
        else:
            self.holders = Holders(self.s, shields)

    def indexes(self) -> Indexes:
        return Indexes(self.holders, self.step.min_runtime_protects, self._index)

    @property
    def index(self) -> WaitingIndex:
        """The step's waiting jobs in lanes, as the commits so far left them. Many steps of
        a busy plan's later rounds simulate nothing: they never build it."""
        if self._index is None:
            ledger = self.step.ledger
            gone = ledger.touched | ledger.lost.keys()
            members = {k for k in self.waiting if k not in gone}
            if self._carried_lanes is not None and self._carried_lanes.members == members:
                self._index = self._carried_lanes
            else:
                self._index = WaitingIndex(self.s, members)
            self._carried_lanes = None
        return self._index

    @property
    def static(self) -> StaticRuns:
        if self._static is None:
            self._static = StaticRuns(self.s, self.index)
        return self._static

    def committed(self, job: JobRequest, trial: Statement) -> None:
        """The step committed ``trial`` for ``job``: bring the indexes up to date."""
        ledger = self.step.ledger
        touched = [job.key, *trial.before]
        for key in touched:
            self.holders.update(key)
        if self._index is not None:
            gone = [k for k in touched if k in ledger.touched or k in ledger.lost]
            self._index.remove(gone)
            self._index.update(k for k in touched if k not in gone)
        if self._static is not None:  # allocations and lanes changed in these projects only
            jobs = self.s.problem.jobs
            self._static.forget({jobs[k].queue for k in touched})

    # ------------------------------------------------------------------ the search

    def solve(self, job: JobRequest, count: int, budget: SimulationBudget) -> Statement | None:
        """Place ``count`` replicas of ``job`` one task at a time, keeping the victims that
        made room for the earlier tasks. Returns the applied trial of the whole gang."""
        s, step = self.s, self.step
        if step.never_accepts(job, count):
            return None
        pools = set(s.pools_for(job))
        free = s.index.total  # GPUs a moved victim could land on, anywhere
        allowed = step.victim_filter(job)
        if step.bounded:
            # candidate GPUs per project the job may take from: no other can give any
            held = self.holders.held(pools, allowed[0])
            largest = {qid: self.holders.largest(qid) for qid in held}
            if free + step.most_taken(job, count, held, largest) < count * job.gpus:
                return None  # no set of victims could ever free enough: skip the search
        elif pool_room(s, pools)[0] + step.most_freed(job, pools, self.holders) < count * job.gpus:
            return None  # no candidate set could pass room_for: skip the search
        recorded: list[Chunk] = []
        for k in range(1, count + 1):
            trial = self._solve_tasks(job, k, recorded, pools, allowed, free, budget)
            if trial is None:
                return None
            if k == count:
                return trial
            recorded = trial.victims
            trial.rollback()
        return None

    def _solve_tasks(
        self,
        job: JobRequest,
        k: int,
        recorded: list[Chunk],
        pools: set[tuple[str, str]],
        allowed: VictimFilter,
        free: int,
        budget: SimulationBudget,
    ) -> Statement | None:
        s, step, jobs = self.s, self.step, self.s.problem.jobs
        room = pool_room(s, {s.pool[job.key]} if job.key in s.pool else set(job.pools))

        def attempt(victims: list[Chunk]) -> Statement | None:
            if not room_for(s, job, k, victims, room):
                return None
            if not step.bounded:
                return self._verified(job, k, victims, budget)
            per_job: Counter[str] = Counter()
            for c in victims:
                per_job[c.key] += len(c.nodes) * jobs[c.key].gpus
            held: dict[str, float] = defaultdict(float)
            largest: dict[str, float] = defaultdict(float)
            for key, gpus in per_job.items():
                qid = jobs[key].queue
                held[qid] += gpus
                largest[qid] = max(largest[qid], gpus)
            if free + step.most_taken(job, k, held, largest) < k * job.gpus:
                return None  # even if all of them were evicted, accepted it could not be
            return self._verified(job, k, victims, budget)

        if recorded and (trial := attempt(recorded)) is not None:
            return trial
        queue = VictimQueue(s, self.holders, pools, allowed, recorded)
        potential = Potential()
        tried: set[tuple[int, ...]] = set()
        # what all victims so far could free in the job's pools, per node and in total: no
        # candidate set passes room_for before some node could hold a replica
        mine = {s.pool[job.key]} if job.key in s.pool else set(job.pools)
        reach: Counter[str] = Counter()
        reached = 0  # reach's total, kept as it grows (summing it per victim was quadratic)
        for c in recorded:
            for n in c.nodes:
                if s.index.pool_of.get(n) in mine:
                    reach[n] += jobs[c.key].gpus
                    reached += jobs[c.key].gpus
        best = max([room[1]] + [s.index.free[n] + g for n, g in reach.items()])
        need = k * job.gpus
        bound = step.side_bound(job, k, self.holders) if step.bounded and free < need else None
        gives = NodeBound(s, job, bound, recorded) if bound is not None else None
        while not budget.exhausted and (chunk := queue.pop()) is not None:
            gpus = jobs[chunk.key].gpus
            for n in chunk.nodes:
                if s.index.pool_of.get(n) in mine:
                    reach[n] += gpus
                    reached += gpus
                    best = max(best, s.index.free[n] + reach[n])
            potential.add(chunk)
            if gives is not None:
                gives.add(chunk)
            if best < job.gpus or room[0] + reached < need:
                continue
            for node in sorted(set(chunk.nodes)):
                if gives is not None and free + gives.most(node) < need:
                    continue  # most_taken would refuse this set
                ids = tuple(potential.on(node))
                if ids not in tried:
                    tried.add(ids)
                    victims = recorded + [potential.chunks[i] for i in ids]
                    if (trial := attempt(victims)) is not None:
                        return trial
        return None

    def _verified(
        self, job: JobRequest, k: int, victims: list[Chunk], budget: SimulationBudget
    ) -> Statement | None:
        """Simulate a candidate set (budget permitting); the trial if the step accepts it."""
        if not budget.spend():
            return None
        trial = self.simulate(job, k, victims)
        if trial is not None and not self.step._accept(job, k, trial):
            trial.rollback()
            return None
        return trial

    def simulate(self, job: JobRequest, count: int, victims: list[Chunk]) -> Statement | None:
        """Evict ``victims``, then allocate ``count`` replicas of ``job`` and the victims
        again in normal allocation order (the other waiting jobs only take their turn).
        Returns the applied trial if ``job`` was placed, else undoes everything."""
        s, jobs = self.s, self.s.problem.jobs
        index, static = self.index, self.static  # built at rest, before any eviction
        trial = Statement(s)
        trial.victims = list(victims)
        removed: dict[str, list[str]] = defaultdict(list)
        for c in victims:
            trial.evict(jobs[c.key], c.nodes)
            removed[c.key].extend(c.nodes)
        trial.removed = dict(removed)
        # a victim asks for what it lost, as one gang if it fell below its minimum
        counts = {
            k: min(len(n), next_chunk(jobs[k], len(s.tasks.get(k, [])))) for k, n in removed.items()
        }
        counts[job.key] = count
        todo: dict[str, tuple[JobKey, int]] = {
            k: (job_order(jobs[k], len(s.tasks.get(k, []))), c * jobs[k].gpus)
            for k, c in counts.items()
        }
        turns = Turns(s, index, static, todo)
        left = set(counts)
        while left and (key := turns.next()) is not None:
            left.discard(key)
            want = jobs[key]
            fits = within_limits(s, want, counts[key] * want.gpus)
            nodes = trial.place(want, counts[key]) if fits else None
            if key == job.key:
                if nodes is None:
                    trial.rollback()
                    return None
                trial.placed = nodes
                # placements only take room: victims that cannot fit now never will, and
                # then their order does not matter
                left = {k for k in left if could_fit(s, jobs[k], counts[k])}
            elif nodes is not None:
                trial.readded[key] = nodes
                if not trial.placed and not could_fit(s, job, count):
                    trial.rollback()  # a victim took back what the job needed: it cannot fit
                    return None
        if not trial.placed:
            trial.rollback()
            return None
        return trial
