"""Reconcile: desired state + observed state + now -> Plan. Pure: no I/O, no clock.

The cycle, in order (KAI's session: allocate, consolidate, reclaim, preempt):

1. Join specs and snapshot into a scheduling problem: which workloads run, wait in a
   cluster's queue, finished, or still need GPUs; which of our jobs no spec asks for.
   Site policy: projects that spent this month's budget start nothing new.
2. Open a session: charge running work to its queues, divide fair shares (past usage,
   decayed by each project's half-life, bends only the over-quota split).
3. Allocate pending work on idle GPUs: KAI's greedy order (limits, deserved for
   non-preemptible work, gangs, bin-packing) beside the CP-SAT model; the better answer
   by the same lexicographic tiers is kept, KAI's on a tie.
4. Consolidate: for a preemptible job that still waits although enough GPUs are free,
   move preemptible running jobs so that its gang finds whole nodes (every moved job
   must land again).
5. Reclaim: a job whose project is below its fair share takes GPUs back from projects
   above theirs.
6. Preempt: a job evicts strictly lower-priority work of its own project.
   Steps 4-6 choose victims as KAI does and verify each choice by simulating the
   allocation that follows. Where KAI evicts now and places the beneficiary in the next
   cycle, the plan does both: evictions run before the submissions that need their GPUs.
7. If anything was disturbed, allocate once more what GPUs are left, as KAI's next cycle
   would; a victim whose old place is still free returns there instead of being evicted.
8. Turn the session's final placement into actions, each with a reason: prune jobs whose
   workload left the specs, cancel duplicate jobs of one workload, then compare every
   workload's replicas with what runs: submit what starts, resize what grows or shrinks,
   move what runs elsewhere, preempt what loses all its GPUs.
9. Report every workload that still waits, with the reason, and the quota table.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from controlplane.converge import converge
from controlplane.plan import DISPLAY_RANK, Plan, QueueStatus, SolverReport, plan_id
from solvers.allocate import Allocator, Grant, allocate
from solvers.consolidate import consolidate
from solvers.engine import Allocation, allocate_best
from solvers.disruption import Ledger
from solvers.policy import Policy
from solvers.preempt import preempt
from solvers.problem import JobRequest, Problem, build_problem, node_key
from solvers.reclaim import reclaim
from solvers.session import Session
from solvers.usage import block_over_budget, fairshare_inputs
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
    """The plan: KAI cycles (steps 1-9 in :func:`cycle`) run to a fixed point on a virtual
    copy of the world (controlplane/converge.py), shown as the net actions."""
    done = converge(lambda world: cycle(desired, world, now=now, policy=policy,
                                        git_commit=git_commit), observed, now)
    if done.rounds == 1 or done.actions is done.first.actions:
        return done.first
    digest = observed_digest(observed)
    return done.last.model_copy(update={
        "id": plan_id(desired.digest, digest, done.actions, now),
        "observed_digest": digest,
        "actions": done.actions,
        "solver": done.first.solver,
    })


def cycle(
    desired: DesiredState,
    observed: Snapshot,
    *,
    now: datetime,
    policy: Policy = Policy(),
    git_commit: str | None = None,
) -> Plan:
    """One KAI cycle against ``observed``: the steps narrated at the top of this module."""
    # 1. the problem, with site policy: budgets
    problem = build_problem(desired, observed, now)
    block_over_budget(problem, desired, observed.usage, now)
    # 2-3. sessions over it (fair shares bent by usage), allocate with both engines
    fs = fairshare_inputs(problem, desired, observed.usage, now)
    chosen = allocate_best(
        problem, lambda: Session.open(problem, fs.usage, policy.k, fs.k), policy)
    session, allocator = chosen.session, chosen
    # 4-6. consolidate, reclaim, preempt: each commits its victims to the session
    ledger = Ledger()
    consolidate(session, ledger)
    reclaim(session, ledger)
    preempt(session, ledger)
    # 7. allocate what GPUs are left (KAI's next cycle, in this plan)
    again = allocate(session, prefer=ledger.lost) if ledger.grants else None
    # 8. actions
    grants = {**allocator.grants, **ledger.grants, **(again.grants if again else {})}
    actions = _prunes(problem) + _placements(desired, problem, session, grants, ledger)
    moves = _move_sequence(problem, actions)  # one move may need the place another one leaves
    actions.sort(key=lambda a: (DISPLAY_RANK[a.op], moves.get(a.workload, 0), a.workload,
                                a.cluster, a.job or ""))
    # 9. what waits, and the quota table
    pending = _pending(problem, session, again or allocator, ledger)
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
        solver=SolverReport(engine=chosen.engine, status=chosen.status,
                            objective=chosen.objective, bound=chosen.bound, gap=chosen.gap),
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


def _placements(desired: DesiredState, problem: Problem, session: Session,
                grants: dict[str, Grant], ledger: Ledger) -> list[Action]:
    """One action per workload whose replicas differ from what runs (a multiset of nodes)."""
    out = []
    for key, job in sorted(problem.jobs.items()):
        nodes = session.tasks.get(key, [])
        replicas = [Replica(node=problem.nodes[n].name, gpus=job.gpus) for n in nodes]
        if not job.running:
            if nodes:
                reason = grants[key].reason
                if key in ledger.disrupted:  # started by allocate, then partly taken back
                    reason = Reason(code=reason.code, message=(
                        f"{reason.message}; starts with {len(nodes)} of {job.replicas} replicas: "
                        f"{ledger.disrupted[key].message}"))
                out.append(_submit(desired, problem, session, job, replicas, reason))
            continue
        before, after = Counter(job.placed), Counter(nodes)
        if before == after:
            continue
        cluster, pool = job.cluster or "", session.pool.get(key, job.pool)
        if not nodes:
            op, reason = Op.PREEMPT, ledger.disrupted[key]
        elif after <= before:  # an elastic victim of reclaim or preemption
            op, reason = Op.RESIZE, ledger.disrupted[key]
        elif before <= after:  # grown: elastic, or a gang completed
            op, reason = Op.RESIZE, grants[key].reason
        else:
            op, reason = Op.MOVE, ledger.disrupted.get(key) or grants[key].reason
        out.append(Action(op=op, workload=key, cluster=cluster, pool=pool[1] if pool else None,
                          job=job.job_id, replicas=replicas if nodes else None, reason=reason))
    return out


def _move_sequence(problem: Problem, actions: list[Action]) -> dict[str, int]:
    """An order for the moves in which each one finds room when it runs: after the
    preemptions and shrinks, one move at a time. (A cycle, which the search does not
    produce in practice, keeps name order.)"""
    used = {k: n.used for k, n in problem.nodes.items()}
    moves = []
    for a in actions:
        job = problem.jobs.get(a.workload)
        if job is None or not job.running:
            continue
        after = Counter(node_key(a.cluster, r.node or "") for r in a.replicas or [])
        if a.op == Op.MOVE:
            moves.append((a.workload, Counter(job.placed), after, job.gpus))
        elif a.op == Op.PREEMPT or (a.op == Op.RESIZE and after <= Counter(job.placed)):
            for n, c in (Counter(job.placed) - after).items():
                used[n] -= c * job.gpus

    def fits(move: tuple[str, Counter[str], Counter[str], int]) -> bool:
        _, before, after, gpus = move
        return all(used[n] + (after[n] - before[n]) * gpus <= problem.nodes[n].capacity
                   for n in after if after[n] > before[n])

    order: dict[str, int] = {}
    while moves:
        key, before, after, gpus = moves.pop(next((i for i, m in enumerate(moves) if fits(m)), 0))
        for n in set(before) | set(after):
            used[n] += (after[n] - before[n]) * gpus
        order[key] = len(order)
    return order


def _submit(desired: DesiredState, problem: Problem, session: Session, job: JobRequest,
            replicas: list[Replica], reason: Reason) -> Action:
    cluster, pool_name = session.pool[job.key]
    pool = problem.pools[session.pool[job.key]]
    spec = desired.workloads[job.key].spec
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
    return Action(op=Op.SUBMIT, workload=job.key, cluster=cluster, pool=pool_name,
                  replicas=replicas, reason=reason, submit=submit)


def _pending(problem: Problem, session: Session, allocator: Allocator | Allocation,
             ledger: Ledger) -> list[Pending]:
    # a waiting job a disruptive step placed no longer waits; its victims now do
    waits = {**allocator.pending, **ledger.waiting}
    out = [Pending(workload=k, reason=r) for k, r in waits.items()
           if len(session.tasks.get(k, [])) < problem.jobs[k].min_replicas]
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
    projects: dict[str, QueueStatus] = {}
    departments: dict[str, QueueStatus] = {}
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
