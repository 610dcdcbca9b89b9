"""``cp cost``: a workload's fan-out candidates as a table, with the ones a plan would submit.

It answers "where could this run, when would it start, and what would it cost?" before
anything is submitted: the same enumeration and choice the plan makes (solvers/fanout/)
for one workload, with start estimates asked of its clusters (controlplane/forecast.py).
For a workload without ``strategy.fanOut`` it shows what fan-out would choose with
``maxParallel`` 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from adapters.base import Adapter
from controlplane.forecast import ForecastRun, candidates_of
from solvers.fanout import Estimate, Verdict, choose
from solvers.kai.allocate import check_limits
from solvers.session import Session
from solvers.sitepolicy.preamble import planning_problem
from specs.actions import Reason, ReasonCode
from specs.desired import DesiredState
from specs.snapshot import Snapshot


@dataclass(frozen=True)
class ActiveJob:
    """A job of the workload on a cluster now: the candidates are what another submission
    would get, not where this one is."""

    cluster: str
    job_id: str
    state: str
    pool: str | None
    started_at: datetime | None
    gpus: int

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "jobId": self.job_id,
            "state": self.state,
            "pool": self.pool,
            "startedAt": _iso(self.started_at) if self.started_at else None,
            "gpus": self.gpus,
        }


@dataclass(frozen=True)
class CandidateTable:
    workload: str
    fan_out: bool
    max_parallel: int
    now: datetime
    forecasted: bool  # estimates were asked of the clusters
    rows: list[Verdict]
    blocked: Reason | None = None  # why a plan would submit none of them now (budget, backoff)
    active: tuple[ActiveJob, ...] = ()  # its jobs on the clusters now

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "fanOut": self.fan_out,
            "maxParallel": self.max_parallel,
            "now": _iso(self.now),
            "forecasted": self.forecasted,
            "blocked": self.blocked.model_dump(mode="json") if self.blocked else None,
            "active": [a.to_json() for a in self.active],
            "candidates": [
                {
                    "name": v.candidate.name,
                    "cluster": v.candidate.cluster,
                    "pool": v.candidate.pool,
                    "partition": v.candidate.partition,
                    "gpuType": v.candidate.gpu_type,
                    "nodes": v.candidate.nodes,
                    "gpusPerNode": v.candidate.gpus_per_node,
                    "tasksPerNode": v.candidate.tasks_per_node,
                    "mode": v.candidate.mode.value,
                    "walltime": v.candidate.walltime,
                    "timeMin": v.candidate.time_min,
                    "estimatedStart": _estimate_json(v.estimate),
                    "hours": v.candidate.hours,
                    "costPerGpuHour": v.candidate.cost_per_gpu_hour,
                    "cost": v.candidate.cost,
                    "status": v.status.value,
                    "chosen": v.status.value == "chosen",
                    "note": v.note,
                }
                for v in self.rows
            ],
        }


def candidate_table(
    desired: DesiredState,
    snapshot: Snapshot,
    workload: str,
    now: datetime,
    adapters: Mapping[str, Adapter] | None,
) -> CandidateTable:
    """The candidates of ``workload`` judged as a plan would; ``adapters`` None: no forecasts."""
    problem = planning_problem(desired, snapshot, now)
    pairs = candidates_of(desired, problem, workload)
    held = problem.fan_out.get(workload) or problem.jobs.get(workload)
    forecasts: dict[str, Estimate] | None = None
    if adapters is not None:
        forecasts = ForecastRun(adapters, now).estimates(pairs)
    spec = desired.workloads[workload].spec
    fan_out = spec.strategy is not None and spec.strategy.fan_out
    parallel = spec.strategy.max_parallel if spec.strategy and fan_out else 1
    rows = choose([c for c, _ in pairs], forecasts, parallel)
    blocked = held.blocked if held is not None and not held.running else None
    if workload in problem.completed:
        blocked = Reason(
            code=ReasonCode.COMPLETED,
            message="it ran to completion and does not run again (a new name runs it again)",
        )
    elif blocked is None and held is not None and not held.running:
        # the allocator's hard caps, against what runs now (limits; deserved quotas for
        # non-preemptible work; per-GPU-type quotas)
        blocked = check_limits(Session.before(problem), held, held.min_replicas * held.gpus)
    return CandidateTable(
        workload,
        fan_out,
        parallel,
        now,
        forecasts is not None,
        rows,
        blocked,
        active_jobs(snapshot, workload),
    )


def active_jobs(snapshot: Snapshot, workload: str) -> tuple[ActiveJob, ...]:
    """The workload's jobs still on a cluster (queued, running or winding down)."""
    return tuple(
        ActiveJob(
            cluster.name,
            job.id,
            job.state.value,
            job.pool,
            job.started_at,
            sum(r.gpus for r in job.replicas),
        )
        for cluster in snapshot.clusters
        for job in cluster.jobs
        if job.workload == workload and job.state.active
    )


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _estimate_json(e: Estimate) -> str | None:
    if isinstance(e, datetime):
        return _iso(e)
    return e  # "never", or None: unknown
