"""Past usage, for time-based fairshare and monthly budgets (Slurm site policy).

Fairshare: GPU-hours decay exponentially with each project's ``halfLife``; the decayed sum
is normalised by what the whole cluster could have delivered over the same decaying
window (capacity x halfLife / ln 2), giving a number comparable with a normalised
over-quota weight (KAI's ``nUsage``). It bends only the over-quota split; deserved quotas
are untouched.

Budgets: GPU-hours (or cost units, GPU-hours x the GPU type's ``costPerGpuHour``) used in
the current calendar month (UTC) against ``budget.gpuHoursPerMonth`` / ``costPerMonth``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from solvers.problem import Problem, Queue
from specs.actions import Reason, ReasonCode
from specs.desired import DesiredState
from specs.snapshot import UsageRecord

DEFAULT_HALF_LIFE = 7 * 86400  # seconds; Slurm's PriorityDecayHalfLife default


def decayed_gpu_hours(records: list[UsageRecord], now: datetime, half_life: int) -> float:
    """Sum of GPU-hours, each halved for every ``half_life`` seconds since it ended."""
    total = 0.0
    for r in records:
        age = max(0.0, (now - r.ended_at).total_seconds())
        total += r.gpu_hours * 0.5 ** (age / half_life)
    return total


def normalised_usage(records: list[UsageRecord], now: datetime, half_life: int,
                     capacity_gpus: float) -> float:
    """Decayed usage as a fraction of what the cluster could have delivered (0 = idle)."""
    if capacity_gpus <= 0:
        return 0.0
    window_hours = capacity_gpus * (half_life / 3600) / math.log(2)
    return decayed_gpu_hours(records, now, half_life) / window_hours


def month_start(now: datetime) -> datetime:
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class MonthUsage:
    gpu_hours: float
    cost: float


def usage_this_month(records: list[UsageRecord], now: datetime,
                     cost_per_gpu_hour: dict[str, float]) -> dict[str, MonthUsage]:
    """Per project: GPU-hours and cost of the work that ended this month (UTC)."""
    start = month_start(now)
    hours: dict[str, float] = defaultdict(float)
    cost: dict[str, float] = defaultdict(float)
    for r in records:
        if start <= r.ended_at <= now:
            hours[r.project] += r.gpu_hours
            cost[r.project] += r.gpu_hours * cost_per_gpu_hour.get(r.gpu_type or "", 0.0)
    return {p: MonthUsage(hours[p], cost[p]) for p in hours}


def over_budget(project: str, budget_hours: float | None, budget_cost: float | None,
                used: MonthUsage | None, now: datetime) -> str | None:
    """Why the project may start nothing new this month, or None while it has budget left."""
    used = used or MonthUsage(0.0, 0.0)
    month = now.strftime("%B %Y")
    if budget_hours is not None and used.gpu_hours >= budget_hours:
        return (f"project {project} used {used.gpu_hours:,.0f} of its {budget_hours:,.0f} "
                f"GPU-hours for {month}; new work waits for next month's budget")
    if budget_cost is not None and used.cost >= budget_cost:
        return (f"project {project} spent {used.cost:,.2f} of its {budget_cost:,.2f} cost units "
                f"for {month}; new work waits for next month's budget")
    return None


@dataclass(frozen=True)
class FairshareInputs:
    usage: dict[str, float]  # queue id -> normalised decayed usage
    k: dict[str, float]  # queue id -> the project's k


def fairshare_inputs(problem: Problem, desired: DesiredState, records: list[UsageRecord],
                     now: datetime) -> FairshareInputs:
    """Per queue: decayed usage normalised by capacity (departments sum their projects)."""
    by_project: dict[str, list[UsageRecord]] = defaultdict(list)
    for r in records:
        by_project[r.project].append(r)
    capacity = problem.total_gpus
    usage: dict[str, float] = defaultdict(float)
    k: dict[str, float] = {}
    for name, project in desired.projects.items():
        fs = project.spec.fairshare
        qid = f"project:{name}"
        if qid not in problem.queues:
            continue
        if fs is not None:
            k[qid] = fs.k
        half_life = fs.half_life if fs and fs.half_life else DEFAULT_HALF_LIFE
        u = normalised_usage(by_project.get(name, []), now, half_life, capacity)
        queue: Queue | None = problem.queues[qid]
        while queue is not None:
            usage[queue.id] += u
            queue = problem.queues.get(queue.parent) if queue.parent else None
    return FairshareInputs(dict(usage), k)


def block_over_budget(problem: Problem, desired: DesiredState, records: list[UsageRecord],
                      now: datetime) -> None:
    """Mark the waiting work of projects that spent this month's budget; running work goes on."""
    cost = {p.gpu_type: p.cost_per_gpu_hour for p in problem.pools.values()}
    used = usage_this_month(records, now, cost)
    for name, project in desired.projects.items():
        budget = project.spec.budget
        if budget is None:
            continue
        why = over_budget(name, budget.gpu_hours_per_month, budget.cost_per_month, used.get(name), now)
        if why is None:
            continue
        for job in problem.jobs.values():
            if job.queue == f"project:{name}" and not job.running and job.blocked is None:
                job.blocked = Reason(code=ReasonCode.OVER_BUDGET, message=why)
