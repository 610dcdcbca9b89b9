"""Step 11's quota table (controlplane/reconcile.py): per project and department, the
quotas, the fair share and allocation after the plan, the GPUs waiting work needs, and
the policy figures of its spec (budget, fairshare, walltimes) so that the next plan can
say which of them changed since this one was applied (controlplane/impact.py)."""

from __future__ import annotations

from controlplane.impact import policy_figures
from controlplane.plan import QueueStatus
from solvers.drift import Drift
from solvers.kai.limits import above_limit
from solvers.problem import Problem
from solvers.session import Session
from specs.actions import Pending
from specs.desired import DesiredState

Table = dict[str, QueueStatus]


def quota_tables(
    desired: DesiredState,
    problem: Problem,
    session: Session,
    pending: list[Pending],
    held: dict[str, float],
    drift: Drift,
) -> tuple[Table, Table]:
    """Per queue: quotas, allocation after the plan, and the GPUs waiting work needs at
    least (an edit waiting to replace its running job: its new version's; running work
    that is only kept from growing: none)."""
    waiting: dict[str, float] = {}
    for p in pending:
        job = problem.jobs.get(p.workload)
        if job is None and p.workload not in problem.candidates:
            job = problem.fan_out.get(p.workload)  # a fan-out workload held back
        if job is not None and p.reason != problem.not_grown.get(p.workload):
            need = drift.needs.get(p.workload, job.min_replicas * job.gpus)
            for q in session.chain(job.queue):
                waiting[q.id] = waiting.get(q.id, 0) + need
    projects: Table = {}
    departments: Table = {}
    for qid, q in sorted(problem.queues.items()):
        parent = problem.queues[q.parent].name if q.parent else None
        spec = (desired.projects if q.kind == "project" else desired.departments).get(q.name)
        status = QueueStatus(
            deserved=q.deserved,
            fair_share=round(session.fair.get(qid, 0.0), 4),
            allocated=session.alloc[qid],
            limit=q.limit,
            pending=waiting.get(qid, 0),
            department=parent,
            held=held.get(qid, 0),
            weight=q.weight,
            rank=q.priority,
            above_limit=above_limit(session, q),
            policy=policy_figures(q.kind, spec.spec) if spec is not None else {},
        )
        (projects if q.kind == "project" else departments)[q.name] = status
    return projects, departments
