"""Two allocators, one answer: KAI's greedy order beside the CP-SAT model, keep the better.

The greedy is exact KAI semantics and fast; the CP-SAT model can do strictly better
(it never gives in-quota GPUs away to fragment a pool). Both answers are scored by the
same lexicographic tiers (solvers/cpsat/score.py); CP-SAT's is kept only when it scores
strictly higher and obeys every placement rule the greedy obeys, so on ties — every KAI
conformance scenario among them — the plan is KAI's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from solvers.kai.allocate import allocate
from solvers.policy import Deadline, Policy
from solvers.problem import Problem
from solvers.session import Grant, Session
from specs.actions import Reason


@dataclass
class Allocation:
    """What the allocate step decided, whichever engine decided it."""

    session: Session
    grants: dict[str, Grant]
    pending: dict[str, Reason]
    engine: str
    status: str
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    notes: list[str] = field(default_factory=list)


def allocate_best(
    problem: Problem,
    open_session: Callable[[], Session],
    policy: Policy,
    deadline: Deadline | None = None,
    *,
    shown: bool = True,
) -> Allocation:
    """Allocate with KAI's greedy and (``policy.engine`` "best") CP-SAT; keep the better.
    CP-SAT is left out once the plan's ``deadline`` has passed (and the plan says so), and
    in a pass nobody sees (not ``shown``: a later round of a plan on its virtual world)
    when no waiting job could be placed at all, where it only proves the greedy right."""
    deadline = deadline or Deadline()
    greedy_session = open_session()
    greedy = allocate(greedy_session)
    kai = Allocation(
        greedy_session, dict(greedy.grants), dict(greedy.pending), "kai-greedy", "HEURISTIC"
    )
    if policy.engine == "kai" or not any(not j.running for j in problem.jobs.values()):
        return kai
    if greedy.none_placeable and not shown:
        return kai  # no job fits or is within its limits: CP-SAT's answer would be the same
    if deadline.expired:
        deadline.cut("cp-sat", "not run: the time limit ran out")
        return kai
    # OR-Tools (and the pandas and numpy it loads) only once CP-SAT runs: commands that
    # never plan start 0.3 s sooner
    from solvers.cpsat import score, solve

    cp_session = open_session()
    # the LP bound is read below only when CP-SAT proved nothing: skipped otherwise
    result = solve(
        problem, cp_session, policy, greedy=greedy.grants, bound_if_optimal=False, deadline=deadline
    )
    report = result.report
    greedy_score = score(problem, cp_session, greedy.grants)
    # the bound: CP-SAT's proven optimum when it has one, else the LP relaxation's
    bound = report.objective if report.status == "OPTIMAL" else report.bound
    kai.objective = result.objective_of(greedy_score)
    kai.bound = bound
    kai.gap = max(0.0, (bound - kai.objective) / bound) if bound else 0.0
    if report.status == "OPTIMAL" and not (result.score > greedy_score):
        kai.status = "OPTIMAL"  # proven: nothing scores higher than the greedy's answer
    if not (result.score > greedy_score) or report.status not in ("OPTIMAL", "FEASIBLE"):
        kai.notes.append(f"cp-sat {report.status}: no better than the greedy")
        return kai
    if (broken := _rule_broken(problem, cp_session, result.grants)) is not None:
        kai.notes.append(f"cp-sat answer set aside: {broken}")
        return kai
    _commit(cp_session, result.grants)
    gap = max(0.0, (bound - report.objective) / bound) if bound else 0.0
    return Allocation(
        cp_session,
        dict(result.grants),
        dict(result.pending),
        "cp-sat",
        report.status,
        report.objective,
        bound,
        gap,
    )


def _rule_broken(problem: Problem, session: Session, grants: dict[str, Grant]) -> str | None:
    """A rule the CP-SAT model does not encode: one replica per node where the pool says
    so; per-GPU-type quotas (limits, deserved for non-preemptible work); the start of each
    waiting fan-out candidate in the cluster's next pass (solvers/placement.py)."""
    taken: Counter[str] = Counter()
    for key, grant in grants.items():
        pool = problem.pools[grant.pool]
        if pool.one_replica_per_node and max(Counter(grant.nodes).values(), default=0) > 1:
            return f"{key} would put two replicas on one node of {grant.pool[0]}/{grant.pool[1]}"
        for node, count in (Counter(grant.nodes) - Counter(session.tasks.get(key, []))).items():
            taken[node] += count * problem.jobs[key].gpus
    if not session.index.leaves_room(taken):
        return "the cluster would no longer start a waiting fan-out candidate"
    return _type_quota_broken(problem, session, grants) if session.per_type else None


def _type_quota_broken(problem: Problem, session: Session, grants: dict[str, Grant]) -> str | None:
    more: Counter[tuple[str, str]] = Counter()
    more_np: Counter[tuple[str, str]] = Counter()
    for key, grant in grants.items():
        job = problem.jobs[key]
        gpu_type = problem.pools[grant.pool].gpu_type
        new = (len(grant.nodes) - len(session.tasks.get(key, []))) * job.gpus
        for q in session.chain(job.queue):
            if q.typed is not None:
                more[q.id, gpu_type] += new
                if not job.preemptible:
                    more_np[q.id, gpu_type] += new
    for (qid, gpu_type), gpus in sorted(more.items()):
        quota = problem.queues[qid].on(gpu_type)
        name = problem.queues[qid].name
        if quota.limit is not None and session.typed_held(qid, gpu_type) + gpus > quota.limit:
            return f"{name} would exceed its {gpu_type} limit"
        np = session.alloc_np_t[qid, gpu_type] + more_np[qid, gpu_type]
        if more_np[qid, gpu_type] and np > quota.deserved:
            return f"{name}'s non-preemptible work would exceed its {gpu_type} deserved"
    return None


def _commit(session: Session, grants: dict[str, Grant]) -> None:
    """Take the chosen answer's GPUs and charge its queues, as the greedy's place() does."""
    for key, grant in sorted(grants.items()):
        job = session.problem.jobs[key]
        have = Counter(session.tasks.get(key, []))
        new = list((Counter(grant.nodes) - have).elements())
        for node in new:
            session.index.take(node, job.gpus)
        session.tasks.setdefault(key, []).extend(new)
        session.pool[key] = grant.pool
        session.charge(job, len(new) * job.gpus)
