"""Past usage, for time-based fairshare (Slurm site policy; budgets are in budgets.py).

Fairshare: GPU-hours decay exponentially with each project's ``halfLife``; the decayed sum
is normalised by what the whole cluster could have delivered over the same decaying
window (capacity x halfLife / ln 2), giving a number comparable with a normalised
over-quota weight (KAI's ``nUsage``). It bends only the over-quota split; deserved quotas
are untouched.

With ``fairshare.byCost`` a project's usage is weighed by GPU type, as Slurm's
``TRESBillingWeights`` do (HPC2N counts an A100 hour as three V100 hours): each run's
GPU-hours times its type's ``costPerGpuHour`` on its cluster, normalised by the cost the whole cluster
could have billed over the same window, so a project that burned A100s is as far ahead
as what it burned was worth.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from solvers.problem import Problem, Queue
from solvers.sitepolicy.prices import Prices
from specs.desired import DesiredState
from specs.snapshot import UsageRecord

DEFAULT_HALF_LIFE = 7 * 86400  # seconds; Slurm's PriorityDecayHalfLife default


def decayed_gpu_hours(
    records: list[UsageRecord],
    now: datetime,
    half_life: int,
    weight: Callable[[UsageRecord], float] | None = None,
) -> float:
    """Sum of GPU-hours, each moment of use halved for every ``half_life`` seconds since
    it (Slurm decays usage as it accrues, not by the end of the job) and, given ``weight``
    (the cost per GPU-hour of a run: prices.py), weighed by it. Use after ``now`` is not
    counted (a plan made for a moment in the past); a record without its start decays
    from its end."""
    total = 0.0
    for r in records:
        hours = r.gpu_hours * (weight(r) if weight is not None else 1.0)
        total += hours * _decay(r, now, half_life)
    return total


def _decay(r: UsageRecord, now: datetime, half_life: int) -> float:
    """The share of a record's GPU-hours left after decay, used evenly over its run: the
    mean of 2^(-age / half_life) over [start, end], ``now`` cutting it short."""
    end = min(r.ended_at, now)
    if r.started_at is None or r.started_at >= r.ended_at:
        since: float = 0.5 ** (max(0.0, (now - r.ended_at).total_seconds()) / half_life)
        return since
    if r.started_at >= now:
        return 0.0
    length = (r.ended_at - r.started_at).total_seconds()
    young = (now - end).total_seconds() / half_life  # ages in half-lives
    old = (now - r.started_at).total_seconds() / half_life
    # the integral of 2^-a over the run, divided by its whole length (what lies beyond
    # now is not counted)
    left: float = 0.5**young - 0.5**old
    return left * half_life / math.log(2) / length


def normalised_usage(
    records: list[UsageRecord],
    now: datetime,
    half_life: int,
    capacity: float,
    weight: Callable[[UsageRecord], float] | None = None,
) -> float:
    """Decayed usage as a fraction of what the cluster could have delivered (0 = idle).
    ``capacity`` is in the usage's units: GPUs, or cost per hour when ``weight`` is given."""
    if capacity <= 0:
        return 0.0
    window_hours = capacity * (half_life / 3600) / math.log(2)
    return decayed_gpu_hours(records, now, half_life, weight) / window_hours


def cost_capacity(problem: Problem) -> float:
    """What the whole cluster bills per hour: each schedulable GPU at its type's cost."""
    return sum(
        n.capacity * problem.pools[n.pool].cost_per_gpu_hour
        for n in problem.nodes.values()
        if n.schedulable and n.pool in problem.pools
    )


@dataclass(frozen=True)
class FairshareInputs:
    usage: dict[str, float]  # queue id -> normalised decayed usage
    k: dict[str, float]  # queue id -> the project's k


def fairshare_inputs(
    problem: Problem, desired: DesiredState, records: list[UsageRecord], now: datetime
) -> FairshareInputs:
    """Per queue: decayed usage normalised by capacity (departments sum their projects)."""
    by_project: dict[str, list[UsageRecord]] = defaultdict(list)
    for r in records:
        by_project[r.project].append(r)
    capacity = problem.total_gpus
    cost = Prices.of(problem)
    billed = cost_capacity(problem)
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
        runs = by_project.get(name, [])
        if fs is not None and fs.by_cost:
            u = normalised_usage(runs, now, half_life, billed, cost)
        else:
            u = normalised_usage(runs, now, half_life, capacity)
        queue: Queue | None = problem.queues[qid]
        while queue is not None:
            usage[queue.id] += u
            queue = problem.queues.get(queue.parent) if queue.parent else None
    return FairshareInputs(dict(usage), k)
