"""Reconcile: desired state + observed state + now -> Plan. Pure: no I/O, no clock.

The cycle, in order:

1. Join specs and snapshot into a scheduling problem: which workloads run, wait in a
   cluster's queue, finished, or still need GPUs; which of our jobs no spec asks for.
2. Open a session: charge running work to its queues, divide fair shares.
3. Allocate pending work in KAI order (limits, deserved for non-preemptible work, gangs,
   bin-packing).
4. Turn the outcome into actions, each with a reason: prune jobs whose workload left the
   specs, cancel duplicate jobs of one workload, submit what was placed, resize what grew.
5. Report every workload that still waits, with the reason, and the quota table.
"""

from __future__ import annotations

from datetime import datetime

from controlplane.plan import DISPLAY_RANK, Plan, QueueStatus, SolverReport, plan_id
from solvers.allocate import Allocator, allocate
from solvers.policy import Policy
from solvers.problem import Problem, build_problem
from solvers.session import Session
from specs.actions import Action, Op, Pending, Reason, ReasonCode, SubmitDetails
from specs.desired import DesiredState
from specs.snapshot import Replica, Snapshot, observed_digest


def plan(
    desired: DesiredState,
    observed: Snapshot,
    *,
    now: datetime,
    policy: Policy = Policy(),
    git_commit: str | None = None,
) -> Plan:
    # 1-2. the problem and a session over it
    problem = build_problem(desired, observed, now)
    session = Session.open(problem, k=policy.k)
    # 3. allocate
    allocator = allocate(session)
    # 4. actions
    actions = _prunes(problem) + _grants(desired, problem, allocator)
    actions.sort(key=lambda a: (DISPLAY_RANK[a.op], a.workload, a.cluster, a.job or ""))
    # 5. what waits, and the quota table
    pending = _pending(problem, allocator)
    projects, departments = _quota_tables(problem, session, pending)
    digest = observed_digest(observed)
    return Plan(
        id=plan_id(desired.digest, digest, actions, now),
        created_at=now,
        spec_digest=desired.digest,
        git_commit=git_commit,
        observed_digest=digest,
        actions=actions,
        pending=pending,
        projects=projects,
        departments=departments,
        solver=SolverReport(engine="kai-greedy", status="HEURISTIC"),
    )


def _prunes(problem: Problem) -> list[Action]:
    out = []
    for cluster, job in problem.orphans:
        out.append(Action(
            op=Op.CANCEL, workload=job.workload or "", cluster=cluster, job=job.id,
            reason=Reason(code=ReasonCode.PRUNE,
                          message=f"workload {job.workload} is no longer in the specs"),
        ))
    for cluster, job in problem.duplicates:
        out.append(Action(
            op=Op.CANCEL, workload=job.workload or "", cluster=cluster, job=job.id,
            reason=Reason(code=ReasonCode.FAN_OUT_LOSER,
                          message=f"another job of {job.workload} already holds its place; "
                          "one job per workload"),
        ))
    return out


def _grants(desired: DesiredState, problem: Problem, allocator: Allocator) -> list[Action]:
    out = []
    for key, grant in sorted(allocator.grants.items()):
        job = problem.jobs[key]
        cluster, pool_name = grant.pool
        pool = problem.pools[grant.pool]
        replicas = [Replica(node=problem.nodes[n].name, gpus=job.gpus) for n in grant.nodes]
        if job.running:
            out.append(Action(op=Op.RESIZE, workload=key, cluster=cluster, pool=pool_name,
                              job=job.job_id, replicas=replicas, reason=grant.reason))
            continue
        spec = desired.workloads[key].spec
        submit = SubmitDetails(
            gpu_type=pool.gpu_type,
            gpus_per_replica=job.gpus,
            partition=pool.partition,
            walltime=spec.walltime,
            command=spec.command,
            priority=job.priority,
            preemptible=job.preemptible,
            checkpoint_signal=spec.checkpoint.signal if spec.checkpoint else None,
            checkpoint_grace=spec.checkpoint.grace if spec.checkpoint else None,
            account=pool.account,
        )
        out.append(Action(op=Op.SUBMIT, workload=key, cluster=cluster, pool=pool_name,
                          replicas=replicas, reason=grant.reason, submit=submit))
    return out


def _pending(problem: Problem, allocator: Allocator) -> list[Pending]:
    out = [Pending(workload=k, reason=r) for k, r in allocator.pending.items()]
    for key, job in problem.submitted.items():
        where = f" ({job.reason})" if job.reason else ""
        out.append(Pending(workload=key, reason=Reason(
            code=ReasonCode.SUBMITTED,
            message=f"job {job.id} waits in the cluster's own queue{where}",
        )))
    return sorted(out, key=lambda p: p.workload)


def _quota_tables(
    problem: Problem, session: Session, pending: list[Pending]
) -> tuple[dict[str, QueueStatus], dict[str, QueueStatus]]:
    waiting: dict[str, float] = {}
    for p in pending:
        job = problem.jobs.get(p.workload)
        if job is not None:
            for q in session.chain(job.queue):
                waiting[q.id] = waiting.get(q.id, 0) + job.min_replicas * job.gpus
    projects, departments = {}, {}
    for qid, q in sorted(problem.queues.items()):
        parent = problem.queues[q.parent].name if q.parent else None
        status = QueueStatus(
            deserved=q.deserved,
            fair_share=round(session.fair.get(qid, 0.0), 4),
            allocated=session.alloc[qid],
            limit=q.limit,
            pending=waiting.get(qid, 0),
            department=parent,
        )
        (projects if q.kind == "project" else departments)[q.name] = status
    return projects, departments
