"""Why a job waits when only ``minRuntime`` stands in its way.

Reclaim and preemption never take work that started less than its project's
``minRuntime`` ago. A job that finds no room for that reason alone should say so, name
the projects whose protection it waits for and when the first protection ends, instead
of reporting "no capacity". The test is GPUs, not placements: the free GPUs of its pools
plus those held there by protected work it could otherwise take (reclaim's or
preemption's rules) must cover what it asks for.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from solvers import reasons
from solvers.kai.allocate import next_chunk
from solvers.kai.candidates import protected
from solvers.kai.disruption import Ledger
from solvers.kai.preempt import Preempt
from solvers.kai.reclaim import Reclaim
from solvers.problem import JobRequest
from solvers.session import Session
from specs.actions import Reason


def protection_wait(session: Session, job: JobRequest) -> Reason | None:
    """The ``min-runtime`` reason for ``job``, or None when protection is not what holds it
    back (nothing protected it could take, or not enough even with it)."""
    s = session
    count = next_chunk(job, len(s.tasks.get(job.key, [])))
    need = count * job.gpus
    pools = set(s.pools_for(job))
    rules = [Reclaim(s, Ledger()), Preempt(s, Ledger())]
    for rule in rules:
        rule.count = count
    open_rules = [r for r in rules if r.admits(job, count)]
    if not open_rules:
        return None
    held = 0
    until: dict[str, tuple[int, datetime]] = {}  # project -> (minRuntime, first end)
    for key, nodes in s.tasks.items():
        victim = s.problem.jobs[key]
        if key == job.key or not nodes or not victim.preemptible or not protected(s, victim):
            continue
        here = sum(1 for n in nodes if s.index.pool_of.get(n) in pools)
        if not here or not any(r.may_evict(job, victim) for r in open_rules):
            continue
        held += here * victim.gpus
        assert victim.started_at is not None and victim.min_runtime is not None
        ends = victim.started_at + timedelta(seconds=victim.min_runtime)
        project = s.problem.queues[victim.queue].name
        first = until.get(project)
        if first is None or ends < first[1]:
            until[project] = (victim.min_runtime, ends)
    free = sum(s.index.pool_free(p)[0] for p in pools)
    if not held or free + held < need:
        return None
    return reasons.min_runtime_wait(need, sorted(until.items()))
