"""Monthly budgets (Slurm site policy, HPC2N-style allocations).

GPU-hours (or cost units, GPU-hours x the GPU type's ``costPerGpuHour`` on the cluster
that ran them: prices.py) used in the
current calendar month (UTC) against ``budget.gpuHoursPerMonth`` / ``costPerMonth``; a
project that spent its budget starts nothing new until next month. Running work goes on,
and an elastic job keeps what it runs: replicas added to it would be new work too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from solvers import reasons
from solvers.problem import Problem
from solvers.sitepolicy.prices import Prices
from specs.actions import Reason
from specs.desired import DesiredState
from specs.snapshot import UsageRecord


def month_start(now: datetime) -> datetime:
    """The start of ``now``'s calendar month in UTC, whatever offset ``now`` carries."""
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def month_name(now: datetime) -> str:
    """``now``'s calendar month in UTC: "November 2026"."""
    return now.astimezone(UTC).strftime("%B %Y")


@dataclass(frozen=True)
class MonthUsage:
    gpu_hours: float
    cost: float


def usage_this_month(
    records: list[UsageRecord], now: datetime, price: Callable[[UsageRecord], float]
) -> dict[str, MonthUsage]:
    """Per project: GPU-hours and cost used this month (UTC) up to ``now``. A record
    with its start counts the part of it between the month's start and ``now`` (records
    are cut at month boundaries); one without counts whole if it ended in that window."""
    start = month_start(now)
    hours: dict[str, float] = defaultdict(float)
    cost: dict[str, float] = defaultdict(float)
    for r in records:
        used = _within(r, start, now)
        if used > 0:
            hours[r.project] += used
            cost[r.project] += used * price(r)
    return {p: MonthUsage(hours[p], cost[p]) for p in hours}


def _within(r: UsageRecord, start: datetime, now: datetime) -> float:
    """The GPU-hours of ``r`` used after ``start`` and up to ``now``."""
    if r.started_at is None or r.started_at >= r.ended_at:
        # a record ending at midnight belongs to the month before
        return r.gpu_hours if start < r.ended_at <= now else 0.0
    low, high = max(r.started_at, start), min(r.ended_at, now)
    if high <= low:
        return 0.0
    return r.gpu_hours * (high - low) / (r.ended_at - r.started_at)


def over_budget(
    project: str,
    budget_hours: float | None,
    budget_cost: float | None,
    used: MonthUsage | None,
    now: datetime,
) -> Reason | None:
    """Why the project may start nothing new this month, or None while it has budget left."""
    used = used or MonthUsage(0.0, 0.0)
    month = month_name(now)
    if budget_hours is not None and used.gpu_hours >= budget_hours:
        return reasons.over_budget_hours(project, used.gpu_hours, budget_hours, month)
    if budget_cost is not None and used.cost >= budget_cost:
        return reasons.over_budget_cost(project, used.cost, budget_cost, month)
    return None


def block_over_budget(
    problem: Problem, desired: DesiredState, records: list[UsageRecord], now: datetime
) -> None:
    """Mark the waiting work of projects that spent this month's budget; running work goes
    on, not grown (a running elastic job asks for no more than it holds)."""
    used = usage_this_month(records, now, Prices.of(problem))
    for name, project in desired.projects.items():
        budget = project.spec.budget
        if budget is None:
            continue
        why = over_budget(
            name, budget.gpu_hours_per_month, budget.cost_per_month, used.get(name), now
        )
        if why is None:
            continue
        problem.spent[f"project:{name}"] = why  # an edit's new version too (solvers/drift.py)
        for key, job in problem.jobs.items():
            if job.queue != f"project:{name}":
                continue
            if job.running:
                if job.replicas > len(job.placed):
                    problem.not_grown[key] = reasons.not_grown(why, len(job.placed), job.replicas)
                job.not_grown()
            elif job.blocked is None:
                job.blocked = why
