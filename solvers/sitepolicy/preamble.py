"""The planning problem with site policy applied: what may start at all, decided once.

Every path that plans (the reconciler, the forecasts it asks the clusters for, ``cp
cost``) needs the same problem: specs and snapshot joined (solvers/problem.py), then the
projects that spent this month's budget start nothing new, a workload whose latest job
failed waits out its retry backoff, a job an apply failed to evict or cancel lately is left
as it is (no victim, not cancelled) until its own backoff has passed, and fan-out
workloads that wait for a start are set aside from KAI's allocation (the clusters'
schedulers choose among their candidates). The set-aside comes last so a held-back
fan-out workload keeps its reason.
"""

from __future__ import annotations

from datetime import datetime

from solvers.problem import Problem, ProblemCache, build_problem, set_aside_fan_out
from solvers.sitepolicy.backoff import block_failed
from solvers.sitepolicy.budgets import block_over_budget
from solvers.sitepolicy.refusals import hold_refused, holding
from specs.desired import DesiredState
from specs.snapshot import Snapshot


def planning_problem(
    desired: DesiredState, observed: Snapshot, now: datetime, cache: ProblemCache | None = None
) -> Problem:
    """The problem a plan solves at ``now``, site policy applied (``cache``: see
    :class:`~solvers.problem.ProblemCache`)."""
    held = holding(observed, now)  # jobs whose eviction or cancel failed lately
    problem = build_problem(desired, observed, now, cache, kept={(r.cluster, r.job) for r in held})
    block_over_budget(problem, desired, observed.usage, now)
    block_failed(problem, observed, now, {k: w.spec.digest for k, w in desired.workloads.items()})
    hold_refused(problem, held)
    set_aside_fan_out(problem)
    return problem
