"""The disruptive steps' common loop, and what they leave for the plan.

Consolidation, reclaim and preempt (solvers/consolidate.py, reclaim.py, preempt.py) are
:class:`Disruption` subclasses: each states its rules (a gate for the waiting job, who may
be a victim, which simulated outcome is acceptable, why a victim was disturbed) and
inherits KAI's loop: waiting jobs in queue order, each searched once (solvers/victims.py),
a success committed to the session at once so the next job sees the cluster as this plan
leaves it. The :class:`Ledger` collects who was placed, evicted, shrunk or moved, and why,
for the reconciler to turn into actions.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import timedelta

from solvers.allocate import Allocator, Grant
from solvers.problem import JobRequest
from solvers.session import Session
from solvers.victims import Budget, Context, Trial, solve
from specs.actions import Reason, ReasonCode


@dataclass
class Ledger:
    """What the disruptive steps did, for the reconciler's actions and reasons."""

    grants: dict[str, Grant] = field(default_factory=dict)  # waiting jobs placed by a step
    disrupted: dict[str, Reason] = field(default_factory=dict)  # victims: why they lost or moved
    waiting: dict[str, Reason] = field(default_factory=dict)  # victims left without GPUs
    lost: dict[str, list[str]] = field(default_factory=dict)  # victim -> nodes it was evicted from
    touched: set[str] = field(default_factory=set)  # placed by a step: waits no more


class Disruption:
    """One disruptive step: its rules (overridden per step) and KAI's loop over waiting jobs.

    Each waiting job, taken in queue order (re-evaluated after every success), passes the
    step's gate, gets its candidate victims, and is solved; a success is committed to the
    session at once, so the next job sees the cluster as this plan leaves it.
    """

    name = ""
    min_runtime_protects = True  # KAI's minruntime plugin guards reclaim and preempt only
    # simulations per waiting job and per step (see Budget): a job whose search runs out
    # keeps waiting, as if no victim set had been found, and so do the rest once the step's
    # budget is spent
    job_budget = 300
    step_budget = 3000

    def __init__(self, session: Session, ledger: Ledger) -> None:
        self.s = session
        self.ledger = ledger
        self.budget = Budget(self.step_budget)
        # queue allocations when solving for the current job began (KAI clones them too)
        self.base_alloc: dict[str, float] = {}
        self.base_np: dict[str, float] = {}
        self.count = 0  # replicas the current waiting job asks for
        self._holders: dict[str, list[str]] = {}  # project -> jobs holding GPUs (by name)

    # ---------------------------------------------------------------- rules

    def admits(self, job: JobRequest, count: int) -> bool:
        """The gate: may this waiting job disturb anyone at all?"""
        return False

    def may_evict(self, job: JobRequest, victim: JobRequest) -> bool:
        return False

    def accept(self, job: JobRequest, k: int, trial: Trial) -> bool:
        """The verdict on a simulated outcome with ``k`` of the job's replicas placed."""
        return True

    def why_evicted(self, job: JobRequest, victim: JobRequest, count: int) -> Reason:
        raise NotImplementedError

    # ---------------------------------------------------------------- the loop

    def run(self) -> None:
        s, jobs = self.s, self.s.problem.jobs
        order = Allocator(s, keys=self._waiting())
        # Jobs of one project with the same shape meet the same victims in the same order,
        # so once one of them failed, its twins fail too until a success changes the
        # cluster (KAI's scheduling signatures, exact here: only identical shapes match).
        failed: set[tuple[object, ...]] = set()
        while (key := order.pop_next()) is not None:
            job = jobs[key]
            count = self.count = order.chunk(job)
            self.base_alloc = defaultdict(float, s.alloc)
            self.base_np = defaultdict(float, s.alloc_np)
            if key in self.ledger.touched or not self.admits(job, count):
                continue
            shape = self._shape(job, count)
            if shape is not None and shape in failed:
                continue
            if self.budget.exhausted:
                break
            candidates = self._candidates(job)
            trial = None
            if candidates:
                trial = solve(s, job, count, candidates, Context(s, self._waiting() - {key}),
                              self._accept, Budget(self.job_budget, within=self.budget))
            if trial is None:
                if shape is not None:
                    failed.add(shape)
                continue
            self._commit(job, count, trial)
            failed.clear()
            self._holders.clear()
            order.forget()  # victims left many queues: recompute the whole order

    def _shape(self, job: JobRequest, count: int) -> tuple[object, ...] | None:
        """What makes two waiting jobs twins; None for a job that holds GPUs already (it is
        a candidate victim for its twin, so the two searches differ)."""
        if self.s.tasks.get(job.key):
            return None
        return (job.queue, job.priority, job.preemptible, job.gpus, count, job.replicas,
                job.min_replicas, tuple(job.pools))

    def _waiting(self) -> set[str]:
        s, ledger = self.s, self.ledger
        return {k for k, j in s.problem.jobs.items()
                if len(s.tasks.get(k, [])) < j.replicas and (j.blocked is None or j.running)
                and k not in ledger.touched and k not in ledger.lost}

    def protected(self, victim: JobRequest) -> bool:
        """Started less than its project's minRuntime ago."""
        if not victim.min_runtime or victim.started_at is None:
            return False
        return victim.started_at + timedelta(seconds=victim.min_runtime) > self.s.problem.now

    def victim_queues(self, job: JobRequest) -> list[str] | None:
        """The projects victims may come from (None: all); narrows the scan of running work."""
        return None

    def _candidates(self, job: JobRequest) -> dict[str, list[str]]:
        s, jobs = self.s, self.s.problem.jobs
        if not self._holders:
            for key in sorted(s.tasks):
                self._holders.setdefault(jobs[key].queue, []).append(key)
        queues = self.victim_queues(job)
        keys = [k for q in (queues if queues is not None else sorted(self._holders))
                for k in self._holders.get(q, [])]
        pools = set(s.pools_for(job))
        out = {}
        for key in keys:
            victim, tasks = jobs[key], s.tasks[key]
            if not tasks or key == job.key or not victim.preemptible:
                continue
            # GPUs in another pool, or on a drained or unknown node, help nobody here (a
            # victim placed again stays in its pool)
            if s.pool.get(key) not in pools or any(n not in s.index.pool_of for n in tasks):
                continue
            # a protected gang is no victim; a protected elastic job may still shrink to its min
            if (self.min_runtime_protects and self.protected(victim)
                    and victim.min_replicas >= victim.replicas):
                continue
            if self.may_evict(job, victim):
                out[key] = list(tasks)
        return out

    def _accept(self, job: JobRequest, k: int, trial: Trial) -> bool:
        for key, removed in trial.removed.items():
            victim = self.s.problem.jobs[key]
            if (self.min_runtime_protects and self.protected(victim)
                    and len(trial.before[key]) - len(removed) < victim.min_replicas):
                return False
        return self.accept(job, k, trial)

    # ---------------------------------------------------------------- commit

    def _commit(self, job: JobRequest, count: int, trial: Trial) -> None:
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
                reason = self.why_evicted(job, jobs[key], count)
                lost = self.ledger.lost.setdefault(key, [])
                lost += (Counter(before) - Counter(after)).elements()
                if not after:
                    self.ledger.waiting[key] = reason
            else:
                reason = Reason(code=ReasonCode.CONSOLIDATE, message=(
                    f"moved from {self._nodes(before)} to {self._nodes(after)} so that {job.key} "
                    f"fits ({self.name})"))
            self.ledger.disrupted[key] = reason
        self.ledger.touched.add(job.key)
        self.ledger.grants[job.key] = Grant(job.key, tuple(s.tasks[job.key]), s.pool[job.key],
                                            self._why_granted(job, names))

    def _nodes(self, keys: list[str]) -> str:
        return ", ".join(sorted(self.s.problem.nodes[k].name for k in keys))

    def _why_granted(self, job: JobRequest, victims: list[str]) -> Reason:
        s = self.s
        q = s.problem.queues[job.queue]
        alloc = s.alloc[q.id]
        room = (f"{self.name} of {', '.join(sorted(victims))} makes room" if victims
                else "on GPUs this plan freed")
        if job.running:
            return Reason(code=ReasonCode.ELASTIC_EXPAND, message=(
                f"grows to {len(s.tasks[job.key])} of {job.replicas} replicas; {room}"))
        if alloc <= q.deserved:
            return Reason(code=ReasonCode.WITHIN_DESERVED, message=(
                f"project {q.name} holds {fmt_gpus(alloc)} of its deserved "
                f"{fmt_gpus(q.deserved)} GPUs with this workload; {room}"))
        return Reason(code=ReasonCode.OVER_QUOTA, message=(
            f"project {q.name} holds {fmt_gpus(alloc)} GPUs, {fmt_gpus(alloc - q.deserved)} above "
            f"its deserved {fmt_gpus(q.deserved)} (fair share {fmt_gpus(s.fair.get(q.id, 0))}); "
            f"{room}"))


def keep_in_place(session: Session, trial: Trial) -> None:
    """Put back every victim whose old place is still free once the plan is made.

    KAI restarts a victim that its simulation placed again, even where nothing needed its
    GPUs. Here a victim returns to where it ran whenever that fits (node room and limits):
    the waiting job's placement is unchanged and fewer replicas are disturbed."""
    s, jobs = session, session.problem.jobs
    for key in dict.fromkeys(c.key for c in trial.victims):
        victim, before, now = jobs[key], trial.before[key], list(s.tasks.get(key, []))
        need = Counter(before)
        need.subtract(now)
        if not +need:
            continue
        if any(s.index.free.get(n, 0) < c * victim.gpus for n, c in need.items() if c > 0):
            continue
        extra = (len(before) - len(now)) * victim.gpus
        if any(q.limit is not None and s.alloc[q.id] + extra > q.limit
               for q in s.chain(victim.queue)):
            continue
        trial.evict(victim, now)
        trial.put(victim, before)


def fmt_gpus(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}"
