"""The disruptive steps' common loop, and what they leave for the plan.

Consolidation, reclaim and preempt (solvers/kai/consolidate.py, reclaim.py, preempt.py) are
:class:`Disruption` subclasses: each states its rules (a gate for the waiting job, who may
be a victim, which simulated outcome is acceptable, why a victim was disturbed) and
inherits KAI's loop: waiting jobs in queue order, each searched once (solvers/kai/victims.py),
a success committed to the session at once so the next job sees the cluster as this plan
leaves it. The :class:`Ledger` collects who was placed, evicted, shrunk or moved, and why,
for the reconciler to turn into actions.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from solvers import reasons
from solvers.kai.allocate import Allocator, next_chunk
from solvers.kai.candidates import Holders, VictimFilter, protected
from solvers.kai.exhaustive import run_exhaustive
from solvers.kai.victims import Indexes, Search, SimulationBudget
from solvers.policy import Deadline
from solvers.problem import JobRequest, PoolKey
from solvers.session import Grant, Session, Statement
from specs.actions import Reason

PROGRESS_EVERY = 250  # waiting jobs between two progress notes of a step


class SideBound(Protocol):
    """A bounded step's bound per victim side, for one waiting job (``side_bound``)."""

    def side(self, qid: str) -> str:
        """The side a victim project belongs to (where its chain parts from the job's)."""
        ...

    def cap(self, qid: str, inside: Mapping[str, float]) -> float:
        """At most what ``most_taken`` counts from the side of project ``qid`` for any set
        holding at most ``inside`` GPUs under each queue of the job's own chain."""
        ...


@dataclass
class Ledger:
    """What the disruptive steps did, for the reconciler's actions and reasons."""

    grants: dict[str, Grant] = field(default_factory=dict)  # waiting jobs placed by a step
    disrupted: dict[str, Reason] = field(default_factory=dict)  # victims: why they lost or moved
    waiting: dict[str, Reason] = field(default_factory=dict)  # victims left without GPUs
    lost: dict[str, list[str]] = field(default_factory=dict)  # victim -> nodes it was evicted from
    touched: set[str] = field(default_factory=set)  # placed by a step: waits no more
    # placed by a step: which step, and whom it disturbed for them
    helped: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    # of those, the victims each moved (placed again elsewhere), not evicted
    moved: dict[str, set[str]] = field(default_factory=dict)
    # the indexes the last step's search left, up to date: the next step may take them over
    indexes: Indexes | None = None
    # victims taken from again after their first eviction: what they were told first (the
    # figures before anything was taken), and whom they gave to after
    first: dict[str, Reason] = field(default_factory=dict)
    then: dict[str, list[str]] = field(default_factory=dict)
    first_for: dict[str, str] = field(default_factory=dict)  # victim -> whom it gave to first


class Disruption:
    """One disruptive step: its rules (overridden per step) and KAI's loop over waiting jobs.

    Each waiting job, taken in queue order (re-evaluated after every success), passes the
    step's gate, gets its candidate victims, and is solved; a success is committed to the
    session at once, so the next job sees the cluster as this plan leaves it.
    """

    name = ""
    min_runtime_protects = True  # KAI's minruntime plugin guards reclaim and preempt only
    # simulations per waiting job and per step (see SimulationBudget): a job whose search runs out
    # keeps waiting, as if no victim set had been found, and so do the rest once the step's
    # budget is spent (the plan then says the step was cut short)
    job_budget = 300
    step_budget = 3000
    bounded = False  # whether most_taken bounds what an accepted outcome takes

    def __init__(
        self,
        session: Session,
        ledger: Ledger,
        *,
        search: str = "indexed",
        deadline: Deadline | None = None,
        retry_twins: bool = False,
    ) -> None:
        self.s = session
        self.ledger = ledger
        self.search = search  # Policy.search: "indexed" or "exhaustive"
        self.retry_twins = retry_twins  # Policy.retry_twins
        self.deadline = deadline or Deadline()
        self.budget = SimulationBudget(self.budget_size)
        # queue allocations when solving for the current job began (KAI clones them too)
        self.base_alloc: dict[str, float] = {}
        self.base_np: dict[str, float] = {}
        self.base_alloc_t: dict[tuple[str, str], float] = {}
        self.count = 0  # replicas the current waiting job asks for
        self.searches_cut = 0  # waiting jobs whose search ran out of simulations

    # ---------------------------------------------------------------- rules

    def admits(self, job: JobRequest, count: int) -> bool:
        """The gate: may this waiting job disturb anyone at all?"""
        return False

    def may_evict(self, job: JobRequest, victim: JobRequest) -> bool:
        return False

    def accept(self, job: JobRequest, k: int, trial: Statement) -> bool:
        """The verdict on a simulated outcome with ``k`` of the job's replicas placed."""
        return True

    def victim_filter(self, job: JobRequest) -> VictimFilter:
        """Whether ``job`` may take from a project at all, and a running job (by name) of a
        project it may take from, for one search: ``may_evict`` and not the job itself.
        Steps whose rules look at projects only say so per project, once (and give no job
        test, None, where every job of such a project may go)."""
        jobs = self.s.problem.jobs
        return (lambda qid: True), (lambda key: key != job.key and self.may_evict(job, jobs[key]))

    def never_accepts(self, job: JobRequest, count: int) -> bool:
        """Whether ``accept`` refuses every outcome for the whole gang, whoever the victims
        (the search is then skipped)."""
        return False

    def most_taken(
        self, job: JobRequest, count: int, held: dict[str, float], largest: dict[str, float]
    ) -> float:
        """At most how many GPUs an accepted outcome really takes (evicts, not moves) from
        victims holding ``held`` GPUs per project (``largest``: the most one of them
        holds). A search, or a candidate set, that could not free the job's GPUs even so
        is skipped: whatever is moved needs as many free GPUs elsewhere."""
        return math.inf

    def side_bound(self, job: JobRequest, count: int, holders: Holders) -> SideBound | None:
        """For a bounded step: what ``most_taken`` counts at most from each side of the
        victims (for ``count`` replicas of ``job``), whichever of them a set holds; None:
        not known."""
        return None

    def most_freed(self, job: JobRequest, pools: set[PoolKey], holders: Holders) -> float:
        """At most how many GPUs every victim ``job`` may take holds in ``pools``: a search
        that could not fit the job even with all of them and the free GPUs is skipped."""
        return math.inf

    def why_evicted(self, job: JobRequest, victim: JobRequest, count: int) -> Reason:
        raise NotImplementedError

    # ---------------------------------------------------------------- the loop

    def run(self) -> None:
        self.deadline.at(self.name)
        if self.deadline.expired:  # an earlier step used up the time
            self.deadline.cut(self.name, "not run: the time limit ran out")
            return
        # per-GPU-type quotas: a queue's order depends on the types a job may use, which
        # the indexed search's closed-form turn order (solvers/kai/turns.py) does not model
        if self.search == "exhaustive" or self.s.per_type:
            self.ledger.indexes = None  # the session changes beyond what indexes were told
            run_exhaustive(self)
        else:
            self._run_indexed()
        if self.searches_cut:
            self.deadline.cut(
                self.name,
                f"the search of {self.searches_cut} waiting job(s) stopped at "
                f"{self.job_budget} simulations",
            )

    def _run_indexed(self) -> None:
        s, jobs = self.s, self.s.problem.jobs
        waiting = self._waiting()
        # nothing changes until a job passes the gate: if none does now, none ever will
        if not any(
            self.admits(jobs[k], next_chunk(jobs[k], len(s.tasks.get(k, [])))) for k in waiting
        ):
            return
        order = Allocator(s, keys=waiting, at_rest=True)
        search = Search(self, waiting, self.ledger.indexes)
        self.ledger.indexes = None  # until the step is over, the indexes are its own
        # Jobs of one project with the same shape meet the same victims in the same order,
        # so once one of them failed, its twins are not searched again in this step (KAI's
        # scheduling signatures, for identical shapes only); KAI's next cycle, the next
        # round of the plan, tries them again.
        failed: set[tuple[object, ...]] = set()
        again: set[str] = set()  # placed by this step and asking for more
        taken = 0  # waiting jobs taken from the order so far, for the progress told
        while (key := order.pop_next()) is not None:
            taken += 1
            if taken % PROGRESS_EVERY == 0:
                seen = min(taken, len(waiting))  # an elastic job may come back for more
                self.deadline.at(f"{self.name}: {seen:,} of {len(waiting):,} waiting jobs")
            job = jobs[key]
            count = self.count = order.chunk(job)
            if (key in self.ledger.touched and key not in again) or not self.admits(job, count):
                continue
            shape = self._shape(job, count)
            if shape is not None and shape in failed:
                continue
            if self.stop():
                break
            self.base_alloc = defaultdict(float, s.alloc)
            self.base_np = defaultdict(float, s.alloc_np)
            self.base_alloc_t = defaultdict(float, s.alloc_t)
            budget = SimulationBudget(self.job_budget, within=self.budget)
            trial = search.solve(job, count, budget)
            if trial is None:
                self.searches_cut += budget.left <= 0
                if shape is not None:
                    failed.add(shape)
                continue
            self._commit(job, count, trial)
            search.committed(job, trial)
            if self.retry_twins:
                failed.clear()
            self.ask_again(order, job, again)
            # allocations changed on the chains of the job and its victims only: the rest
            # of the order stands
            for queue in {job.queue, *(jobs[k].queue for k in trial.before)}:
                order.forget(queue)
        self.ledger.indexes = search.indexes()

    def ask_again(self, order: Allocator, job: JobRequest, again: set[str]) -> None:
        """An elastic job the step grew by one replica takes its turn again in this step,
        as KAI's next cycle would give it: a plan need not wait a round per replica."""
        if len(self.s.tasks.get(job.key, [])) < job.replicas:
            order.requeue(job)
            again.add(job.key)

    def stop(self) -> bool:
        """Whether the step must stop before the next search (and the plan say so)."""
        if self.budget.exhausted:
            self.deadline.cut(self.name, f"its {self.budget_size:,} simulations were spent")
            return True
        if self.deadline.expired:
            self.deadline.cut(self.name, "the time limit ran out")
            return True
        return False

    @property
    def budget_size(self) -> int:
        """Simulations for the whole step: the indexed search's grow with the work (one
        more per job in the problem); the exhaustive search keeps its first fixed amount."""
        if self.search == "exhaustive":
            return self.step_budget
        return self.step_budget + len(self.s.problem.jobs)

    def _shape(self, job: JobRequest, count: int) -> tuple[object, ...] | None:
        """What makes two waiting jobs twins; None for a job that holds GPUs already (it is
        a candidate victim for its twin, so the two searches differ)."""
        if self.s.tasks.get(job.key):
            return None
        return (
            job.queue,
            job.priority,
            job.preemptible,
            job.gpus,
            count,
            job.replicas,
            job.min_replicas,
            tuple(job.pools),
        )

    def _waiting(self) -> set[str]:
        s, ledger = self.s, self.ledger
        return {
            k
            for k, j in s.problem.jobs.items()
            if len(s.tasks.get(k, [])) < j.replicas
            and (j.blocked is None or j.running)
            and k not in ledger.touched
            and k not in ledger.lost
        }

    def protected(self, victim: JobRequest) -> bool:
        """Started less than its project's minRuntime ago."""
        return protected(self.s, victim)

    def victim_queues(self, job: JobRequest) -> list[str] | None:
        """The projects victims may come from (None: all); narrows the scan of running work."""
        return None

    def _accept(self, job: JobRequest, k: int, trial: Statement) -> bool:
        for key, removed in trial.removed.items():
            victim = self.s.problem.jobs[key]
            if (
                self.min_runtime_protects
                and self.protected(victim)
                and len(trial.before[key]) - len(removed) < victim.min_replicas
            ):
                return False
        return self.accept(job, k, trial)

    # ---------------------------------------------------------------- commit

    def _commit(self, job: JobRequest, count: int, trial: Statement) -> None:
        s, jobs = self.s, self.s.problem.jobs
        keep_in_place(s, trial)
        names = []
        for key in dict.fromkeys(c.key for c in trial.victims):
            before, after = trial.before[key], s.tasks.get(key, [])
            if Counter(before) == Counter(after):
                continue  # placed again where it was: nothing to do
            names.append(key)
            if Counter(after) <= Counter(before):
                # evicted, or shrunk: what is left may still be taken by a later job
                reason = self._evicted_again(key, job)
                if reason is None:
                    reason = self.why_evicted(job, jobs[key], count)
                    self.ledger.first_for[key] = job.key
                lost = self.ledger.lost.setdefault(key, [])
                lost += (Counter(before) - Counter(after)).elements()
                if not after:
                    self.ledger.waiting[key] = reason
                self.ledger.moved.get(job.key, set()).discard(key)
            else:
                self.ledger.moved.setdefault(job.key, set()).add(key)
                reason = reasons.moved(
                    self._nodes(before),
                    self._nodes(after),
                    job.key,
                    self.name,
                    kept=(len(after), len(before)),
                )
            self.ledger.disrupted[key] = reason
        self.ledger.touched.add(job.key)
        if job.key in self.ledger.helped:  # it grew again in this step: all who made room
            earlier = self.ledger.helped[job.key][1]
            names = earlier + [n for n in names if n not in earlier]
        self.ledger.helped[job.key] = (self.name, names)
        why = why_granted(s, job, self.name, names, self.ledger.moved.get(job.key, set()))
        self.ledger.grants[job.key] = Grant(job.key, tuple(s.tasks[job.key]), s.pool[job.key], why)

    def _evicted_again(self, key: str, job: JobRequest) -> Reason | None:
        """A victim taken from again (an elastic job, replica by replica): what it was told
        the first time, and the later beneficiaries; None the first time."""
        ledger = self.ledger
        if key not in ledger.lost or key not in ledger.disrupted:
            return None
        first = ledger.first.setdefault(key, ledger.disrupted[key])
        later = ledger.then.setdefault(key, [])
        if job.key != ledger.first_for.get(key) and job.key not in later:  # each named once
            later.append(job.key)
        return reasons.then_for(first, later) if later else first

    def _nodes(self, keys: list[str]) -> str:
        return ", ".join(sorted(self.s.problem.nodes[k].name for k in keys))


def why_granted(
    session: Session, job: JobRequest, step: str, victims: list[str], moved: set[str]
) -> Reason:
    """Why a disruptive step placed ``job``: its quota standing and whom it disturbed
    (``moved``: those placed again elsewhere)."""
    problem = session.problem
    q = problem.queues[job.queue]
    grows = (len(session.tasks[job.key]), job.replicas) if job.running else None
    # work this plan placed and took back is not disturbed: the job just went ahead of it
    ahead = [v for v in victims if not problem.ran_before(v)]
    return reasons.granted(
        q,
        session.alloc[q.id],
        session.fair.get(q.id, 0),
        grows=grows,
        room=reasons.room_made(step, [v for v in victims if problem.ran_before(v)], ahead, moved),
        held_np=None if job.preemptible else session.alloc_np[q.id],
        cpu_only=job.gpus == 0,
        whole=not job.elastic,
    )


def keep_in_place(session: Session, trial: Statement) -> None:
    """Put back every victim whose old place is still free once the plan is made.

    KAI restarts a victim that its simulation placed again, even where nothing needed its
    GPUs. Here a victim returns to where it ran whenever that fits (node room and limits):
    the waiting job's placement is unchanged and fewer replicas are disturbed."""
    jobs = session.problem.jobs
    for key in dict.fromkeys(c.key for c in trial.victims):
        return_home(session, trial, jobs[key], trial.before[key])


def restore_displaced(session: Session, ledger: Ledger) -> None:
    """After every step, put back each disturbed job whose old place is free in the end.

    A later step can free what an earlier one moved a job away from (consolidation moves a
    job so a gang fits; preemption then evicts the neighbour it made room beside): the
    move is then needed by nobody. A job put back is no longer disturbed."""
    s, jobs = session, session.problem.jobs
    home = set()
    for key in sorted(ledger.disrupted):
        job = jobs[key]
        if job.running and return_home(s, Statement(s), job, job.placed):
            home.add(key)
            for record in (
                ledger.disrupted,
                ledger.lost,
                ledger.waiting,
                ledger.first,
                ledger.then,
                ledger.first_for,
            ):
                record.pop(key, None)
    for key, (step, victims) in sorted(ledger.helped.items()):
        if home & set(victims) and key in ledger.grants:  # say only who is still disturbed
            still = [v for v in victims if v not in home]
            ledger.helped[key] = (step, still)
            grant = ledger.grants[key]
            ledger.grants[key] = Grant(
                grant.key,
                grant.nodes,
                grant.pool,
                why_granted(s, jobs[key], step, still, ledger.moved.get(key, set())),
            )


def return_home(session: Session, trial: Statement, job: JobRequest, home: list[str]) -> bool:
    """Move ``job`` back onto ``home`` (its replicas before) if that fits now: node room,
    and limits for the replicas it regains. Returns whether it is home."""
    s, now = session, list(session.tasks.get(job.key, []))
    need = Counter(home)
    need.subtract(now)
    if not +need:
        return Counter(home) == Counter(now)
    if any(s.index.free.get(n, 0) < c * job.gpus for n, c in need.items() if c > 0):
        return False
    if not s.index.leaves_room({n: c * job.gpus for n, c in need.items() if c}):
        return False  # the cluster would start a waiting candidate elsewhere, or not at all
    extra = (len(home) - len(now)) * job.gpus
    if any(q.limit is not None and s.alloc[q.id] + extra > q.limit for q in s.chain(job.queue)):
        return False
    pool = s.pool.get(job.key)
    gpu_type = s.problem.pools[pool].gpu_type if pool is not None else None
    if s.per_type and extra > 0 and gpu_type and s.over_type_quota(job, gpu_type, extra):
        return False  # and the limit of its GPU type
    trial.evict(job, now)
    trial.put(job, home)
    return True
