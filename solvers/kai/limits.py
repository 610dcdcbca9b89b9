"""Limits cut below what a queue holds: bring the queue down to its new limit.

KAI's ``limit`` only gates new allocations; work already running above a limit that was
just lowered would keep its GPUs until it ends. A declarative control plane acts on the
change instead: when a project or department holds more than its ``quota.limit`` (or, with
a per-GPU-type quota, more of a type than that type's limit), its preemptible work (on
that type) is taken back until it fits, victims chosen as reclaim chooses them:
first from the project of the subtree that stands furthest above its allocatable share,
inside it in victim order (lowest priority, then youngest; an elastic job's replicas
above ``minReplicas`` one at a time before its core gang). No more than needed: a job
taken before a larger one that alone brings the queue down is spared.

Never a victim: non-preemptible work (it stays, and the queue stays above its limit until
it ends) and the core gang of work still inside its project's ``minRuntime`` (taken back
once it is over); an elastic job inside it may still lose its replicas above
``minReplicas``, as reclaim and preempt may take them (solvers/kai/candidates.py).
Departments are brought down before their projects, so a project's own cut counts what
its department's cut already took.

Holds block new work; they do not evict. What is held for a cluster that did not answer
(its stand-ins, controlplane/unreachable.py) counts against a limit (a GPU type's too,
where a stand-in's type is known: solvers/problem/standins.py), so nothing new starts
beyond it, but is never a reason to take work back: it may stand for work never
submitted, or long ended. A queue gives back only what the work the clusters show holds
above its limit (``Session.seen``); counting the stand-ins it may stay above the limit
until the cluster answers, and the next plan decides then.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

from solvers import reasons
from solvers.kai.candidates import protected
from solvers.kai.disruption import Ledger
from solvers.order import VictimOrder
from solvers.problem import JobRequest, Queue
from solvers.session import Session, Statement


def enforce_limits(session: Session, ledger: Ledger) -> None:
    """Evict preemptible work from every queue above its limit (mutating the session),
    recording what was taken back, and why, in ``ledger``."""
    s = session
    queues = sorted(
        (q for q in s.problem.queues.values() if q.limit is not None or q.typed),
        key=lambda q: (len(s.chain(q.id)), q.id),  # departments before their projects
    )
    for q in queues:
        for cap in _caps(s, q):
            if cap.seen() <= cap.limit:
                continue  # what stand-ins hold keeps new work out, and takes nothing back
            seen_before = cap.seen()
            taken = []
            victims = [v for v in _victims(s, q) if cap.counts(v.job)]
            for victim, replicas in _needed(victims, seen_before - cap.limit):
                nodes = s.tasks[victim.key][-replicas:]
                Statement(s).evict(victim, nodes)
                ledger.lost.setdefault(victim.key, []).extend(nodes)
                taken.append(victim.key)
            kept = _kept_by_min_runtime(s, q, cap) if cap.seen() > cap.limit else []
            for key in taken:
                reason = reasons.down_to_limit(
                    q, seen_before, key, cap.seen(), kept, cap.limit, cap.gpu_type, cap.unseen()
                )
                ledger.disrupted[key] = reason
                if not s.tasks.get(key):
                    ledger.waiting[key] = reason


def held_back(session: Session, job: JobRequest, gpus: float) -> bool:
    """Whether a limit on the job's chain leaves no room for ``gpus`` more where stand-ins
    hold some of it: a disruptive step then makes no room for the job (the room it lacks
    is, at least in part, what they hold; evicting for it would evict for them). A limit
    on one GPU type the job may use is enough, though it may use others: a step could
    evict work of that type to make room under it."""
    s = session
    if not s.unseen:  # no stand-ins (every step asks, for every waiting job)
        return False
    chain = s.chain(job.queue)
    if any(
        q.limit is not None and s.unseen.get(q.id, 0.0) > 0 and s.alloc[q.id] + gpus > q.limit
        for q in chain
    ):
        return True
    if not s.unseen_t:  # no stand-in of a known type under a per-type quota
        return False
    types = {s.problem.pools[p].gpu_type for p in s.pools_for(job)}
    return any(
        (limit := q.on(t).limit) is not None
        and s.unseen_t.get((q.id, t), 0.0) > 0
        and s.typed_held(q.id, t) + gpus > limit
        for q in chain
        if q.typed is not None
        for t in types
    )


def above_limit(session: Session, q: Queue) -> str | None:
    """Why ``q`` still holds more than its limit (or a type's) once the plan is made (None:
    it does not): the work minRuntime keeps for now, jobs the cluster refused to evict
    lately (their backoff), and non-preemptible work, never taken back."""
    s, out = session, []
    for cap in _caps(s, q):
        if cap.held() <= cap.limit:
            continue
        inside = _projects_under(s, q)
        fixed = sum(
            len(nodes) * s.problem.jobs[key].gpus
            for key, nodes in s.tasks.items()
            if nodes
            and s.problem.jobs[key].queue in inside
            and not s.problem.jobs[key].preemptible
            and key not in s.problem.stand_ins
            and cap.counts(s.problem.jobs[key])
        )
        kept = _kept_by_min_runtime(s, q, cap)
        protected_now = {k for k, _ in kept}
        refused: list[tuple[str, str, datetime]] = []
        for key, nodes in s.tasks.items():
            job = s.problem.jobs[key]
            if job.refused_until is None or job.ending or not nodes or key in protected_now:
                continue
            if job.queue in inside and job.preemptible and cap.counts(job):
                refused.append((key, job.job_id or "", job.refused_until))
        refused.sort()
        out.append(
            reasons.above_limit(
                q, cap.held(), kept, fixed, cap.limit, cap.gpu_type, cap.unseen(), refused
            )
        )
    return "; ".join(out) or None


class _Cap:
    """A limit of a queue: on all its GPUs (``gpu_type`` None) or on one type's."""

    def __init__(self, s: Session, q: Queue, limit: float, gpu_type: str | None) -> None:
        self.s, self.q, self.limit, self.gpu_type = s, q, limit, gpu_type

    def held(self) -> float:
        if self.gpu_type is None:
            return self.s.alloc[self.q.id]
        return self.s.typed_held(self.q.id, self.gpu_type)

    def unseen(self) -> float:
        """Of ``held``, what stand-ins hold (a type's limit counts those of that type only:
        solvers/problem/standins.py)."""
        if self.gpu_type is None:
            return self.s.unseen.get(self.q.id, 0.0)
        return self.s.unseen_t.get((self.q.id, self.gpu_type), 0.0)

    def seen(self) -> float:
        """Of ``held``, what work the clusters show holds: what is taken back down."""
        return self.held() - self.unseen()

    def counts(self, job: JobRequest) -> bool:
        """Whether the GPUs ``job`` holds count against this limit."""
        if self.gpu_type is None:
            return True
        pool = self.s.pool.get(job.key)
        return pool is not None and self.s.problem.pools[pool].gpu_type == self.gpu_type


def _caps(s: Session, q: Queue) -> list[_Cap]:
    caps = [_Cap(s, q, q.limit, None)] if q.limit is not None else []
    for gpu_type, quota in sorted((q.typed or {}).items()):
        if quota.limit is not None:
            caps.append(_Cap(s, q, quota.limit, gpu_type))
    return caps


def _kept_by_min_runtime(s: Session, q: Queue, cap: _Cap) -> list[tuple[str, datetime]]:
    """The work under ``q`` that minRuntime keeps (of what counts against ``cap``), with
    when its protection ends."""
    inside = _projects_under(s, q)
    out = []
    for key, nodes in s.tasks.items():
        job = s.problem.jobs[key]
        if (
            nodes
            and job.queue in inside
            and job.preemptible
            and cap.counts(job)
            and protected(s, job)
        ):
            assert job.started_at is not None and job.min_runtime is not None
            out.append((key, job.started_at + timedelta(seconds=job.min_runtime)))
    return sorted(out)


def _needed(victims: list[Victim], excess: float) -> list[tuple[JobRequest, int]]:
    """The victims, in their order, that bring ``excess`` GPUs back: taken in order until
    enough, then those a later, larger one made unneeded are spared (the last taken
    first). An elastic job whose core gang goes loses all its replicas."""
    taken: list[Victim] = []
    for victim in victims:
        if excess <= 0:
            break
        taken.append(victim)
        excess -= victim.replicas * victim.job.gpus
    spare, whole, kept = -excess, set(), []
    for v in reversed(taken):
        gpus = v.replicas * v.job.gpus
        if gpus <= spare and v.job.key not in whole:
            spare -= gpus
            continue
        if v.core:
            whole.add(v.job.key)
        kept.append((v.job, v.replicas))
    return kept[::-1]


class Victim(NamedTuple):
    job: JobRequest
    replicas: int  # to take
    core: bool  # its core gang (the job's last replicas), not a replica above minReplicas


def _victims(s: Session, q: Queue) -> list[Victim]:
    """What may go, in the order it goes: the most over-share project first, inside it
    elastic replicas above the minimum, then whole jobs, in victim order."""
    inside = _projects_under(s, q)
    # how far each project stands above what it may hold
    over = {p: s.seen(p) - s.allocatable_share(s.problem.queues[p]) for p in inside}
    out: list[tuple[tuple[float, int, VictimOrder, int], Victim]] = []
    for key, nodes in s.tasks.items():
        job = s.problem.jobs[key]
        if job.queue not in inside or not nodes or not job.evictable:
            continue
        rank = VictimOrder(job, len(nodes))
        for i in range(max(0, len(nodes) - job.min_replicas)):  # elastic replicas, one by one
            out.append(((-over[job.queue], 0, rank, i), Victim(job, 1, False)))
        core = min(len(nodes), job.min_replicas)
        if core and not protected(s, job):  # minRuntime shields the core gang only
            out.append(((-over[job.queue], 1, rank, 0), Victim(job, core, True)))
    out.sort(key=lambda t: t[0])
    return [v for _, v in out]


def _projects_under(s: Session, q: Queue) -> set[str]:
    if q.kind == "project":
        return {q.id}
    out: set[str] = set()
    for child in q.children:
        out |= _projects_under(s, s.problem.queues[child])
    return out
