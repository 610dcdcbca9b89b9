"""Fan-out submissions: which waiting fan-out workloads may submit, and the submits.

Step 4 of the fan-out choice (solvers/fanout/candidates.py has steps 1-3): KAI's hard caps
for a workload the allocator does not place, counted once however many candidates it has,
then the chosen candidates as ``submit`` actions with their reasons.

Pure and deterministic: forecasts and the time come in as arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from solvers import reasons
from solvers.fanout.candidates import (
    Candidate,
    Status,
    Verdict,
    _start,
    choose,
    enumerate_candidates,
    node_counts,
)
from solvers.order import job_order
from solvers.problem import JobRequest, Problem
from solvers.session import Session
from specs.actions import NEVER, Action, Estimate, Op, Pending, Reason, ReasonCode, SubmitDetails
from specs.durations import format_duration
from specs.models import WorkloadSpec
from specs.snapshot import Replica


def quota_gate(session: Session, job: JobRequest, gpus: int) -> Reason | None:
    """KAI's hard caps for a workload the allocator does not place (the session counts
    the GPUs of fan-out workloads whose candidates wait, once each)."""
    once = reasons.counted_once(gpus)
    chain = session.chain(job.queue)
    for q in chain:
        have = session.alloc[q.id]
        if q.limit is not None and have + gpus > q.limit:
            return reasons.over_limit(q, have, gpus, once)
    if not job.preemptible:
        for q in chain:
            have = session.alloc_np[q.id]
            if have + gpus > q.deserved:
                return reasons.non_preemptible_over_deserved(q, have, gpus, once)
    return None


def submit_action(
    c: Candidate, job: JobRequest, spec: WorkloadSpec, reason: Reason, segment: int | None = None
) -> Action:
    """The ``submit`` of one candidate: the cluster places it (replica nodes null)."""
    details = SubmitDetails.for_workload(
        spec,
        gpu_type=c.gpu_type,
        partition=c.partition,
        walltime=c.walltime,
        account=c.account,
        time_min=c.time_min,
        nodes=c.nodes if c.nodes != job.replicas else None,
        segment=segment,
        candidate=c.name,
    )
    return Action(
        op=Op.SUBMIT,
        workload=job.key,
        cluster=c.cluster,
        pool=c.pool,
        replicas=[Replica(node=None, gpus=job.gpus) for _ in range(job.replicas)],
        reason=reason,
        submit=details,
    )


@dataclass
class FanOutPlan:
    actions: list[Action] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    verdicts: dict[str, list[Verdict]] = field(default_factory=dict)  # by workload


def plan_fan_out(
    problem: Problem,
    session: Session,
    specs: Mapping[str, WorkloadSpec],
    forecasts: Mapping[str, Estimate] | None,
) -> FanOutPlan:
    """Submissions for the fan-out workloads that wait for a start, in KAI's job order
    (priority, then older, then name); the GPUs of each one submitted are charged to the
    session so the next one's gate sees them, and a candidate that fits now holds the
    GPUs the cluster will start it on, so the next candidate does not count them free."""
    out = FanOutPlan()
    counts = node_counts(problem)
    waiting = [j for k, j in problem.fan_out.items() if k not in problem.candidates]
    for job in sorted(waiting, key=job_order):
        # a pool too short for the walltime may still take checkpoint segments
        if job.blocked is not None and job.blocked.code != ReasonCode.NO_ELIGIBLE_POOL:
            out.pending.append(Pending(workload=job.key, reason=job.blocked))
            continue
        gpus = job.replicas * job.gpus
        if (why := quota_gate(session, job, gpus)) is not None:
            out.pending.append(Pending(workload=job.key, reason=why))
            continue
        spec = specs[job.key]
        seg = problem.segments.get(job.key)
        candidates = enumerate_candidates(job, spec, problem.pools, counts, seg)
        if session.per_type and candidates:
            candidates, why = _within_type_quotas(session, job, candidates, gpus)
            if why is not None:
                out.pending.append(Pending(workload=job.key, reason=why))
                continue
        parallel = spec.strategy.max_parallel if spec.strategy else 1
        verdicts = choose(candidates, _after_placements(session, candidates, forecasts), parallel)
        out.verdicts[job.key] = verdicts
        chosen = [v for v in verdicts if v.status is Status.CHOSEN]
        if not chosen:
            out.pending.append(Pending(workload=job.key, reason=_why_none(verdicts)))
            continue
        session.charge(job, gpus)
        for v in chosen:
            c = v.candidate
            session.hold((c.cluster, c.pool), [c.gpus_per_node] * c.nodes, c.walltime)
        resumed = seg is not None and seg.done > 0
        for i, v in enumerate(chosen, 1):
            reason = reasons.fan_out_candidate(
                i,
                len(chosen),
                v.candidate.describe(),
                describe_start(v.estimate, problem.now, forecasts is not None),
                describe_cost(v.candidate),
            )
            if resumed and seg is not None:
                reason = reasons.resumed(seg.describe(), reason)
            out.actions.append(
                submit_action(
                    v.candidate, job, spec, reason, seg.number if seg is not None else None
                )
            )
    return out


def _within_type_quotas(
    session: Session, job: JobRequest, candidates: list[Candidate], gpus: int
) -> tuple[list[Candidate], Reason | None]:
    """Per-GPU-type quotas: the candidates on a type they leave room for, or why none."""
    binding = {
        t: session.over_type_quota(job, t, gpus) for t in sorted({c.gpu_type for c in candidates})
    }
    kept = [c for c in candidates if binding[c.gpu_type] is None]
    if kept:
        return kept, None
    found = [(t, *b) for t, b in binding.items() if b is not None]
    return [], reasons.over_type_quota(gpus, found)


def _after_placements(
    session: Session, candidates: Sequence[Candidate], forecasts: Mapping[str, Estimate] | None
) -> Mapping[str, Estimate] | None:
    """Forecasts with "now" taken back where the GPUs this plan places leave no room."""
    if forecasts is None:
        return None
    now = session.problem.now
    out = dict(forecasts)
    for c in candidates:
        start = _start(forecasts.get(c.key))
        if start is not None and start <= now + timedelta(seconds=60) and not _room(session, c):
            out[c.key] = None
    return out


def _room(session: Session, c: Candidate) -> bool:
    """Enough nodes of the candidate's pool keep its GPUs free in the session."""
    pool = (c.cluster, c.pool)
    free = [f for node, f in session.index.free.items() if session.index.pool_of[node] == pool]
    return sum(f >= c.gpus_per_node for f in free) >= c.nodes


def _why_none(verdicts: list[Verdict]) -> Reason:
    return reasons.no_fan_out_candidate([v.candidate.name for v in verdicts])


def describe_start(estimate: Estimate, now: datetime, forecast: bool) -> str:
    if estimate == NEVER:
        return "never starts"
    start = _start(estimate)
    if start is None:
        return "start unknown" if forecast else "no start estimate (ranked by cost)"
    wait = int((start - now).total_seconds())
    if wait <= 60:
        return "starts now"
    rounded = -(-wait // 60) * 60
    return f"starts in ~{format_duration(rounded)} (at {reasons.stamp(start)})"


def describe_cost(c: Candidate) -> str:
    return (
        f"cost {reasons.gpus(round(c.cost, 2))} ({c.gpus} GPUs x {round(c.hours, 4):g} h x "
        f"{c.cost_per_gpu_hour:g})"
    )
