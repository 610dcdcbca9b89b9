"""Step 8 of the cycle (controlplane/reconcile.py): the session's final placement as
actions, each with its reason. Jobs whose workload left the specs are pruned, duplicates
and fan-out losers cancelled; every workload's replicas are compared with what runs: a
submit for what starts, a resize for what grows or shrinks, a move for what runs
elsewhere, a preempt for what loses all its GPUs, and for an edited workload's
replacement (solvers/drift.py) a submit of the new version and a cancel of the old job.
A segmented workload's submit asks for its next segment (step 10)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping

from controlplane.converge import VIRTUAL
from controlplane.unreachable import STAND_IN
from solvers import reasons
from solvers.drift import Drift
from solvers.kai.disruption import Ledger
from solvers.problem import JobRequest, Problem, node_key, stuck_on
from solvers.session import Grant, Session
from specs.actions import Action, Op, Pending, Reason, SubmitDetails
from specs.desired import DesiredState
from specs.models import WorkloadSpec
from specs.snapshot import Job, JobRun, JobState, Replica, Snapshot


def prunes(problem: Problem) -> list[Action]:
    """The cancels of our jobs no workload needs: of workloads gone from the specs, jobs
    queued for an edited spec, on nodes others took or in a pool the specs removed, and
    second jobs of one workload."""
    namesakes = _namesakes(problem)
    out = []
    for c, job in problem.orphans:
        namesake, moved = namesakes.get(job.workload or "", (None, False))
        out.append(_cancel(c, job, reasons.pruned(job.workload or "", namesake, moved=moved)))
    out += [_cancel(c, job, reasons.queued_for_old_version(job.id)) for c, job in problem.outdated]
    for c, job in problem.stranded:
        out.append(_cancel(c, job, _stranded_why(problem, c, job)))
    out += [
        _cancel(c, job, reasons.queued_in_removed_pool(job.id, job.pool or ""))
        for c, job in problem.pool_gone
    ]
    out += [
        _cancel(c, job, reasons.member_failed(job.id, job.reason)) for c, job in problem.failing
    ]
    for cluster, job in problem.duplicates:
        key, candidate = job.workload or "", job.candidate or job.id
        winner = problem.jobs.get(key)
        if key in problem.won:
            where, done = problem.won[key]
            reason = reasons.fan_out_loser(key, done.id, where, candidate, completed=True)
        elif winner is not None and winner.fan_out:
            silent = (winner.job_id or "").startswith(STAND_IN)  # ran there when last seen
            won = None if silent else winner.job_id
            reason = reasons.fan_out_loser(key, won, winner.cluster, candidate)
        else:
            kept = (winner.job_id, winner.cluster) if winner else (None, None)
            reason = reasons.duplicate(key, *kept)
        out.append(_cancel(cluster, job, reason))
    return out


def _stranded_why(problem: Problem, cluster: str, job: Job) -> Reason:
    """Why a job waiting where it cannot start is cancelled: its node's reservation begins
    before it would end, or the node is taken, drained or gone."""
    stuck = stuck_on(cluster, job, problem.nodes)
    for name in stuck:
        node = problem.nodes.get(node_key(cluster, name))
        if node is not None and node.window is not None and node.runs_into(job.walltime):
            return reasons.queued_on_reserved_node(job.id, name, node.window, job.walltime)
    gone = [n for n in stuck if node_key(cluster, n) not in problem.nodes]
    return reasons.queued_on_taken_nodes(job.id, stuck, gone)


def _namesakes(problem: Problem) -> dict[str, tuple[str, bool]]:
    """Pruned workloads -> a workload of the specs with the same name in another project,
    and whether it was moved there: a project gone from the specs was renamed without
    saying so, most likely; one still there lost the workload to the other project where
    that one has not run yet (a namesake that ran or runs is another workload)."""
    gone = [w for _, job in problem.orphans if (w := job.workload or "")]
    if not gone:
        return {}
    by_name: dict[str, str] = {}
    for key in sorted(problem.jobs, reverse=True):  # the first in name order wins
        by_name[key.partition("/")[2]] = key
    out = {}
    for w in gone:
        namesake = by_name.get(w.partition("/")[2])
        if namesake is None:
            continue
        if f"project:{w.partition('/')[0]}" not in problem.queues:
            out[w] = (namesake, False)  # its project renamed
        elif not _ran(problem, namesake):
            out[w] = (namesake, True)
    return out


def _ran(problem: Problem, key: str) -> bool:
    """The workload has a job, or had one that completed."""
    return (
        problem.jobs[key].job_id is not None or key in problem.submitted or key in problem.completed
    )


def unlisted(problem: Problem, session: Session, listed: Collection[str]) -> list[Pending]:
    """What runs but differs from its spec, listed nowhere else: work winding down, and
    running elastic work kept from growing (a spent budget), which still runs."""
    return winding_down(problem, listed) + [
        Pending(workload=k, reason=r)
        for k, r in problem.not_grown.items()
        if k not in listed and session.tasks.get(k)
    ]


def queued_waits(problem: Problem) -> list[Pending]:
    """The workloads whose jobs wait in the clusters' own queues: the job (a fan-out
    workload's candidates), and for one queued for the version before an edit, left as it
    is while a refused cancel's backoff lasts, that."""
    out = []
    for key, job in problem.submitted.items():
        reason = reasons.submitted(_observed_id(job.id), job.reason)
        if key in problem.candidates:
            reason = reasons.candidates_waiting(
                [
                    (_observed_id(j.id), j.candidate or c, j.reason)
                    for c, j in problem.candidates[key]
                ]
            )
        if (stale := problem.stale.get(key)) is not None and stale in problem.refused:
            refusal, until = problem.refused[stale]
            reason = reasons.replacement_refused(stale[1], refusal, until, queued=True)
        out.append(Pending(workload=key, reason=reason))
    return out


def _observed_id(job_id: str) -> str | None:
    """A job's id as the clusters know it; None for one a plan's earlier round submitted
    on the virtual world (controlplane/converge.py): the plan submits it."""
    return None if job_id.startswith(VIRTUAL) else job_id


def winding_down(problem: Problem, listed: Collection[str]) -> list[Pending]:
    """The workloads whose job winds down that nothing else lists: nothing of them may run
    once it has ended, and the plan must not read as if the clusters matched the specs."""
    stopped = {job.workload for _, job in problem.failing}  # the plan cancels them: said so
    return [
        Pending(workload=key, reason=reasons.ending(req.job_id, req.ending_why))
        for key, req in sorted(problem.jobs.items())
        if req.ending and key not in listed and key not in stopped
    ]


def _cancel(cluster: str, job: Job, reason: Reason) -> Action:
    return Action(
        op=Op.CANCEL, workload=job.workload or "", cluster=cluster, job=job.id, reason=reason
    )


def segment(problem: Problem, action: Action) -> Action:
    """A submit of a segmented workload placed by KAI: the next segment's time and number."""
    seg = problem.segments.get(action.workload)
    if (
        seg is None
        or action.op != Op.SUBMIT
        or action.submit is None
        or action.submit.segment is not None
    ):
        return action
    submit = action.submit.model_copy(
        update={"walltime": seg.walltime_for(), "segment": seg.number}
    )
    reason = reasons.resumed(seg.describe(), action.reason) if seg.done else action.reason
    return action.model_copy(update={"submit": submit, "reason": reason})


def submits_told(
    problem: Problem, observed: Snapshot, specs: Mapping[str, WorkloadSpec], actions: list[Action]
) -> list[Action]:
    """Step 10: the submits of segmented workloads ask for their next segment, and a submit
    says what it follows: a failed job it retries, an edit's old job a plan cancelled."""
    ended = cancelled_versions(observed, specs)
    return [retried(problem, segment(problem, succeeded(ended, a))) for a in actions]


def cancelled_versions(observed: Snapshot, specs: Mapping[str, WorkloadSpec]) -> dict[str, str]:
    """Workloads whose latest run ended cancelled under another version of their spec ->
    that job: an edit's old job a plan cancelled (saving its checkpoint first, say), so
    the workload's next start is its new version. Not those with a job of another
    version now: the submit replaces that job, and says so."""
    older = {
        j.workload
        for c in observed.clusters
        for j in c.jobs
        if j.state.active
        and (spec := specs.get(j.workload or "")) is not None
        and j.spec_digest not in (None, spec.digest)
    }
    latest: dict[str, JobRun] = {}
    for run in (r for c in observed.clusters for r in c.runs if r.ended_at is not None):
        seen = latest.get(run.workload)
        if seen is None or (run.ended_at, run.started_at) > (seen.ended_at, seen.started_at):
            latest[run.workload] = run
    return {
        w: run.job
        for w, run in latest.items()
        if run.state == JobState.CANCELLED
        and w not in older
        and run.spec_digest is not None
        and (spec := specs.get(w)) is not None
        and run.spec_digest != spec.digest
    }


def succeeded(cancelled: Mapping[str, str], action: Action) -> Action:
    """A submit of a workload in ``cancelled`` (:func:`cancelled_versions`) says which job
    of the version before it follows."""
    if action.op != Op.SUBMIT or (old := cancelled.get(action.workload)) is None:
        return action
    return action.model_copy(update={"reason": reasons.succeeds(action.reason, old)})


def retried(problem: Problem, action: Action) -> Action:
    """A submit that retries a failed job says so: which job, how it failed, the streak
    (the plan's history is where the failures are read later)."""
    job = problem.jobs.get(action.workload) or problem.fan_out.get(action.workload)
    failure = job.retries if job is not None else None
    if action.op != Op.SUBMIT or failure is None:
        return action
    why = reasons.retry(
        action.reason,
        failure.job,
        failure.state,
        failure.exit_code,
        failure.ended_at,
        failure.count,
    )
    return action.model_copy(update={"reason": why})


def placements(
    desired: DesiredState,
    problem: Problem,
    session: Session,
    grants: dict[str, Grant],
    ledger: Ledger,
    drift: Drift,
) -> list[Action]:
    """One action per workload whose replicas differ from what runs (a multiset of nodes);
    an edited workload's replacement is a submit of the new version and a cancel of the
    old job."""
    out = []
    for key, job in sorted(problem.jobs.items()):
        nodes = session.tasks.get(key, [])
        if key in drift.replaced:
            replicas = _replicas(problem, job, nodes)
            out += _replacement(desired, problem, session, job, replicas, drift, ledger)
            continue
        if not job.running:
            if nodes:
                reason = grants[key].reason
                if key in ledger.disrupted:  # started by allocate, then partly taken back
                    taken_by = [b for b, (_, victims) in ledger.helped.items() if key in victims]
                    reason = reasons.started_short(reason, len(nodes), job.replicas, taken_by)
                replicas = _replicas(problem, job, nodes)
                out.append(_submit(desired, problem, session, job, replicas, reason))
            continue
        shrunk = drift.shrunk.get(key)
        placed = shrunk[0] if shrunk else job.placed
        if placed == nodes:
            continue  # most running work stays as it is: no multisets, no replicas built
        before, after = Counter(placed), Counter(nodes)
        if before == after:
            continue
        replicas = _replicas(problem, job, nodes)
        cluster, pool = job.cluster or "", session.pool.get(key, job.pool)
        if not nodes:
            op, reason = Op.PREEMPT, ledger.disrupted[key]
        elif after <= before:  # fewer replicas wanted, or an elastic victim
            op = Op.RESIZE
            reason = _shrunk_why(shrunk, ledger.disrupted.get(key), len(nodes), job.replicas)
        elif before <= after:  # grown: elastic, or a gang completed
            op, reason = Op.RESIZE, grants[key].reason
        else:
            op, reason = Op.MOVE, ledger.disrupted.get(key) or grants[key].reason
        out.append(
            Action(
                op=op,
                workload=key,
                cluster=cluster,
                pool=pool[1] if pool else None,
                job=job.job_id,
                replicas=replicas if nodes else None,
                reason=reason,
                shrink=op is Op.RESIZE and after <= before,
            )
        )
    return out


def _shrunk_why(
    edit: tuple[list[str], Reason] | None, taken: Reason | None, left: int, wanted: int
) -> Reason:
    """Why a running job keeps ``left`` replicas of those it runs: an edit to fewer
    (``wanted``), replicas taken back (reclaim, priority, a limit), or both, told in the
    order they came (the second's figures count the first)."""
    if edit is not None and (taken is None or left >= wanted):
        return edit[1]
    assert taken is not None, "a running job shrinks by an edit, or disrupted"
    if edit is None:
        return taken
    return Reason(code=taken.code, message=f"{edit[1].message}; then {taken.message}")


def _replicas(problem: Problem, job: JobRequest, nodes: list[str]) -> list[Replica]:
    return [Replica(node=problem.nodes[n].name, gpus=job.gpus) for n in nodes]


def _replacement(
    desired: DesiredState,
    problem: Problem,
    session: Session,
    job: JobRequest,
    replicas: list[Replica],
    drift: Drift,
    ledger: Ledger,
) -> list[Action]:
    """The new version where the session left it (a later step may have taken it back),
    and the cancel of the old job."""
    old = drift.replaced[job.key]
    out = []
    if replicas and not old.saves_first:  # a job saving its checkpoint ends first
        out.append(_submit(desired, problem, session, job, replicas, old.submit))
    cancel = old.cancel if replicas else ledger.disrupted.get(job.key, old.cancel)
    out.append(
        Action(op=Op.CANCEL, workload=job.key, cluster=old.cluster, job=old.job_id, reason=cancel)
    )
    return out


def _submit(
    desired: DesiredState,
    problem: Problem,
    session: Session,
    job: JobRequest,
    replicas: list[Replica],
    reason: Reason,
) -> Action:
    cluster, pool_name = session.pool[job.key]
    pool = problem.pools[session.pool[job.key]]
    spec = desired.workloads[job.key].spec
    submit = SubmitDetails.for_workload(
        spec,
        gpu_type=pool.gpu_type,
        partition=pool.partition,
        walltime=job.time_limit(pool),
        account=pool.account,
    )
    return Action(
        op=Op.SUBMIT,
        workload=job.key,
        cluster=cluster,
        pool=pool_name,
        replicas=replicas,
        reason=reason,
        submit=submit,
    )
