"""Usage per project and department (``cp usage``), as Slurm's ``sshare`` shows it.

Budgets and decayed usage stop or slow work long before anyone looks, so they must be
visible: per project and department, the deserved quota and fair share the plan gives,
the GPU-hours used with each project's decay applied (and that usage as the share of
what the clusters could have delivered, the number that bends the fair-share split),
this month's GPU-hours and cost, per GPU type too, and the budget left.

Every number comes from the functions the planner itself uses
(solvers/sitepolicy/usage.py and budgets.py) over the snapshot's usage records, which
the store derives from the runs of our jobs (controlplane/store/runs.py): what this
shows is what the next plan acts on. Pure: data in, rows out.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from controlplane.inventory import chain_of
from controlplane.plan import Plan, QueueStatus
from solvers.sitepolicy.budgets import (
    MonthUsage,
    month_name,
    month_start,
    over_budget,
    usage_this_month,
)
from solvers.sitepolicy.preamble import planning_problem
from solvers.sitepolicy.prices import Prices
from solvers.sitepolicy.usage import DEFAULT_HALF_LIFE, decayed_gpu_hours, fairshare_inputs
from specs.actions import Reason
from specs.desired import DesiredState
from specs.models import Budget as BudgetSpec
from specs.snapshot import Snapshot, UsageRecord


@dataclass(frozen=True)
class Budget:
    unit: str  # gpu-hours | cost
    per_month: float
    used: float
    left: float  # never below 0
    spent: Reason | None  # why nothing new starts this month, once it is spent


@dataclass(frozen=True)
class TypeUsage:
    gpu_type: str  # "-" for runs whose GPU type is unknown
    gpu_hours: float
    cost: float


@dataclass(frozen=True)
class UsageRow:
    name: str
    kind: str  # project | department
    parent: str | None
    status: QueueStatus  # deserved, fair share, allocated after the plan
    half_life: int | None  # seconds (projects); a department's projects decay by their own
    by_cost: bool  # fairshare.byCost: usage weighed by each GPU type's cost
    decayed_gpu_hours: float
    share: float  # decayed usage / what the clusters could deliver (KAI's normalised usage)
    month: MonthUsage
    by_type: list[TypeUsage]
    budget: Budget | None


@dataclass(frozen=True)
class UsageReport:
    now: datetime
    month: str  # "November 2026"
    month_start: datetime
    projects: list[UsageRow]
    departments: list[UsageRow]


def usage_report(desired: DesiredState, snapshot: Snapshot, plan: Plan) -> UsageReport:
    now = plan.created_at
    problem = planning_problem(desired, snapshot, now)
    shares = fairshare_inputs(problem, desired, snapshot.usage, now).usage
    cost = Prices.of(problem)
    records: dict[str, list[UsageRecord]] = defaultdict(list)
    for r in snapshot.usage:
        records[r.project].append(r)

    projects: list[UsageRow] = []
    for name, project in sorted(desired.projects.items()):
        status = plan.projects.get(name)
        if status is None:
            continue
        fs = project.spec.fairshare
        half_life = fs.half_life if fs is not None and fs.half_life else DEFAULT_HALF_LIFE
        mine = records.get(name, [])
        month = usage_this_month(mine, now, cost).get(name, MonthUsage(0.0, 0.0))
        projects.append(
            UsageRow(
                name=name,
                kind="project",
                parent=project.spec.department,
                status=status,
                half_life=half_life,
                by_cost=bool(fs and fs.by_cost),
                decayed_gpu_hours=decayed_gpu_hours(mine, now, half_life),
                share=shares.get(f"project:{name}", 0.0),
                month=month,
                by_type=_by_type(mine, now, cost, name),
                budget=_budget(name, project.spec.budget, month, now),
            )
        )

    departments: list[UsageRow] = []
    for name, dept in sorted(desired.departments.items()):
        status = plan.departments.get(name)
        if status is None:
            continue
        below = [p for p in projects if name in chain_of(desired, p.name)]
        hours = sum(p.month.gpu_hours for p in below)
        spent = sum(p.month.cost for p in below)
        departments.append(
            UsageRow(
                name=name,
                kind="department",
                parent=dept.spec.parent,
                status=status,
                half_life=None,
                by_cost=False,
                decayed_gpu_hours=sum(p.decayed_gpu_hours for p in below),
                share=shares.get(f"department:{name}", 0.0),
                month=MonthUsage(hours, spent),
                by_type=_sum_types([t for p in below for t in p.by_type]),
                budget=None,
            )
        )
    return UsageReport(
        now=now,
        month=month_name(now),
        month_start=month_start(now),
        projects=projects,
        departments=departments,
    )


def _by_type(
    records: list[UsageRecord], now: datetime, cost: Prices, project: str
) -> list[TypeUsage]:
    out = []
    for gpu_type in sorted({r.gpu_type or "-" for r in records}):
        theirs = [r for r in records if (r.gpu_type or "-") == gpu_type]
        used = usage_this_month(theirs, now, cost).get(project)
        if used is not None:
            out.append(TypeUsage(gpu_type, used.gpu_hours, used.cost))
    return out


def _sum_types(parts: list[TypeUsage]) -> list[TypeUsage]:
    hours: dict[str, float] = defaultdict(float)
    spent: dict[str, float] = defaultdict(float)
    for t in parts:
        hours[t.gpu_type] += t.gpu_hours
        spent[t.gpu_type] += t.cost
    return [TypeUsage(k, hours[k], spent[k]) for k in sorted(hours)]


def _budget(
    project: str, spec: BudgetSpec | None, month: MonthUsage, now: datetime
) -> Budget | None:
    if spec is None:
        return None
    spent = over_budget(project, spec.gpu_hours_per_month, spec.cost_per_month, month, now)
    if spec.gpu_hours_per_month is not None:
        limit, used, unit = spec.gpu_hours_per_month, month.gpu_hours, "gpu-hours"
    else:
        limit, used, unit = spec.cost_per_month or 0.0, month.cost, "cost"
    return Budget(unit, limit, used, max(0.0, limit - used), spent)
