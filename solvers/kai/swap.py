"""Disturbed jobs that took each other's places: each keeps a node it ran on instead.

A disruptive step re-places its victims where the simulation puts them. Two elastic
victims can end up each on a node the other left (consolidation shrinks both to make room
for a gang: one goes to the other's old node, and the other the other way). Carried out
as moves, neither could go first: each needs the node the other still holds. The same GPUs
are used if each keeps a node it ran on, and the moves become shrinks, which free room
rather than need it. Pure: the session is changed in place.
"""

from __future__ import annotations

from collections import Counter

from solvers import reasons
from solvers.kai.disruption import Ledger
from solvers.problem import JobRequest
from solvers.session import Session, Statement


def swap_homes(session: Session, ledger: Ledger) -> None:
    """While two disturbed jobs of the same GPUs per replica each hold, in one pool, a node
    the other ran on and they did not, trade those replicas (usage per node is unchanged)."""
    s, jobs = session, session.problem.jobs
    # evicted victims hold nothing: only those placed again may sit on another's node
    movers = sorted(
        k for k in ledger.disrupted if jobs[k].running and s.tasks.get(k) and _away(s, jobs[k])
    )
    swapped: set[str] = set()
    for i, a_key in enumerate(movers):
        for b_key in movers[i + 1 :]:
            a, b = jobs[a_key], jobs[b_key]
            if a.gpus != b.gpus or s.pool.get(a_key) != s.pool.get(b_key):
                continue
            while (pair := _trade(s, a, b)) is not None:
                x, y = pair  # a leaves x for y (its old node), b leaves y for x (its own)
                trial = Statement(s)
                trial.evict(a, [x])
                trial.evict(b, [y])
                trial.put(a, [y])
                trial.put(b, [x])
                swapped |= {a_key, b_key}
    for key in sorted(swapped):
        _say_shrunk(s, ledger, jobs[key])


def _away(s: Session, job: JobRequest) -> list[str]:
    """The job's replicas on nodes it did not run on before the plan."""
    return list((Counter(s.tasks.get(job.key, [])) - Counter(job.placed)).elements())


def _trade(s: Session, a: JobRequest, b: JobRequest) -> tuple[str, str] | None:
    """A node ``x`` of ``a``'s new ones that ``b`` ran on, and ``y`` of ``b``'s new ones
    that ``a`` ran on, neither job already on the node it would get."""
    a_now, b_now = set(s.tasks.get(a.key, [])), set(s.tasks.get(b.key, []))
    a_home = set(a.placed) - a_now
    b_home = set(b.placed) - b_now
    for x in sorted(set(_away(s, a)) & b_home):
        for y in sorted(set(_away(s, b)) & a_home):
            return x, y
    return None


def _say_shrunk(s: Session, ledger: Ledger, job: JobRequest) -> None:
    """A job now only on nodes it ran on gave replicas back: its reason says so."""
    now, before = Counter(s.tasks.get(job.key, [])), Counter(job.placed)
    if not now <= before:
        return  # still moved as well: the step's own reason stands
    helped = next(
        ((b, step) for b, (step, victims) in ledger.helped.items() if job.key in victims), None
    )
    if helped is None:
        return
    beneficiary, step = helped
    left = before - now
    names = ", ".join(sorted(s.problem.nodes[n].name for n in left.elements()))
    ledger.disrupted[job.key] = reasons.gave_back(names, beneficiary, step)
