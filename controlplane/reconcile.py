"""Reconcile: desired state + observed state + now -> Plan. Pure: no I/O, no clock.

The cycle, in order (KAI's session: allocate, consolidate, reclaim, preempt):

1. Join specs and snapshot into a scheduling problem: which workloads run, wait in a
   cluster's queue, finished, or still need GPUs; which of our jobs no spec asks for.
   A workload that runs in checkpoint segments is finished only when its segments add
   up to ``checkpoint.total`` (or its command ended early, having nothing left to do).
   Site policy: projects that spent this month's budget start nothing new; a workload
   whose latest job failed waits out its retry backoff (1, 2, 4 ... minutes, at most an
   hour). Fan-out workloads that wait for a start are set aside: the clusters' own
   schedulers, not KAI's allocator, choose among their candidates (step 9).
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
   workload left the specs, cancel duplicate jobs of one workload (and the candidates of
   a fan-out workload once one of them runs: the earliest started wins, ties by job id),
   then compare every workload's replicas with what runs: submit what starts, resize
   what grows or shrinks, move what runs elsewhere, preempt what loses all its GPUs.
9. Fan-out: a fan-out workload waiting for a start passes KAI's hard checks (limits on
   every level, deserved for non-preemptible work) with its GPUs counted once; then its
   candidates (GPU type x pool x shape x direct/backfill/checkpoint mode) are judged by
   the forecasts given (estimated start per candidate, or none: then by cost), dominated
   ones dropped, and up to ``maxParallel`` are submitted. While they wait nothing new is
   submitted; the first to run wins (step 8 cancels the rest).
10. Checkpoint segments: the submit of a segmented workload asks for its next segment —
   what is left plus the grace, at most the walltime — and one that resumes says so
   (``checkpoint-resume``: "segment 3: 16h of 24h done").
11. Report every workload that still waits, with the reason, and the quota table.

:func:`plan` runs such cycles on a virtual copy of the world until one changes nothing
(controlplane/converge.py) and shows the net actions, so an applied plan is a fixed point.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime

from controlplane.converge import converge
from controlplane.plan import DISPLAY_RANK, Plan, QueueStatus, SolverReport, plan_id
from solvers.allocate import Allocator, Grant, allocate
from solvers.backoff import block_failed
from solvers.consolidate import consolidate
from solvers.engine import Allocation, allocate_best
from solvers.disruption import Ledger
from solvers.fanout import Estimate, plan_fan_out
from solvers.policy import Policy
from solvers.preempt import preempt
from solvers.problem import JobRequest, Problem, build_problem, node_key, set_aside_fan_out
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
    forecasts: Mapping[str, Estimate] | None = None,
) -> Plan:
    """The plan: KAI cycles (steps 1-11 in :func:`cycle`) run to a fixed point on a virtual
    copy of the world (controlplane/converge.py), shown as the net actions.

    ``forecasts``: the estimated start of fan-out candidates by ``Candidate.key``
    (solvers/fanout.py; gathered by controlplane/forecast.py); without them fan-out
    candidates rank by cost alone."""
    done = converge(lambda world: cycle(desired, world, now=now, policy=policy,
                                        git_commit=git_commit, forecasts=forecasts),
                    observed, now)
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
    forecasts: Mapping[str, Estimate] | None = None,
) -> Plan:
    """One KAI cycle against ``observed``: the steps narrated at the top of this module."""
    # 1. the problem (segments finished or not), with site policy: budgets, retry backoff;
    #    fan-out workloads waiting for a start leave KAI's allocation
    problem = build_problem(desired, observed, now)
    block_over_budget(problem, desired, observed.usage, now)
    block_failed(problem, observed, now)
    set_aside_fan_out(problem)
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
    # 9. fan-out: the quota gate, then the chosen candidates
    specs = {k: w.spec for k, w in desired.workloads.items()}
    fan = plan_fan_out(problem, session, specs, forecasts)
    actions += fan.actions
    # 10. checkpoint segments: KAI's submits ask for the next segment (fan-out's already do)
    actions = [_segment(problem, a) for a in actions]
    moves = _move_sequence(problem, actions)  # one move may need the place another one leaves
    actions.sort(key=lambda a: (DISPLAY_RANK[a.op], moves.get(a.workload, 0), a.workload,
                                a.cluster, a.job or ""))
    # 11. what waits, and the quota table
    pending = sorted(_pending(problem, session, again or allocator, ledger) + fan.pending,
                     key=lambda p: p.workload)
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
        winner = problem.jobs.get(job.workload or "")
        if winner is not None and winner.fan_out:
            message = (f"fan-out: job {winner.job_id} of {job.workload} runs; candidate "
                       f"{job.candidate or job.id} is no longer needed")
        else:
            message = (f"another job of {job.workload} already holds its place; "
                       "one job per workload")
        out.append(Action(
            op=Op.CANCEL, workload=job.workload or "", cluster=cluster, job=job.id,
            reason=Reason(code=ReasonCode.FAN_OUT_LOSER, message=message),
        ))
    return out


def _segment(problem: Problem, action: Action) -> Action:
    """A submit of a segmented workload placed by KAI: the next segment's time and number."""
    seg = problem.segments.get(action.workload)
    if (seg is None or action.op != Op.SUBMIT or action.submit is None
            or action.submit.segment is not None):
        return action
    submit = action.submit.model_copy(update={"walltime": seg.walltime_for(),
                                              "segment": seg.number})
    reason = action.reason
    if seg.done:
        reason = Reason(code=ReasonCode.CHECKPOINT_RESUME,
                        message=f"{seg.describe()}; {reason.message}")
    return action.model_copy(update={"submit": submit, "reason": reason})


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
    submit = SubmitDetails.for_workload(spec, gpu_type=pool.gpu_type, partition=pool.partition,
                                        walltime=spec.walltime, account=pool.account)
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
        message = f"job {job.id} waits in the cluster's own queue{where}"
        if key in problem.candidates:
            jobs = ", ".join(f"job {j.id} ({', '.join(filter(None, [j.candidate or c, j.reason]))})"
                             for c, j in problem.candidates[key])
            message = (f"{len(problem.candidates[key])} fan-out candidate(s) wait in the clusters' "
                       f"queues: {jobs}; the first to run wins")
        out.append(Pending(workload=key, reason=Reason(code=ReasonCode.SUBMITTED, message=message)))
    return sorted(out, key=lambda p: p.workload)


def _quota_tables(
    problem: Problem, session: Session, pending: list[Pending]
) -> tuple[dict[str, QueueStatus], dict[str, QueueStatus]]:
    waiting: dict[str, float] = {}
    for p in pending:
        job = problem.jobs.get(p.workload)
        if job is None and p.workload not in problem.candidates:
            job = problem.fan_out.get(p.workload)  # a fan-out workload held back
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
