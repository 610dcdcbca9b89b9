"""Reconcile: desired state + observed state + now -> Plan. Pure: no I/O, no clock.

The cycle, in order (KAI's session: allocate, consolidate, reclaim, preempt):

0. A cluster that did not answer is left alone: every workload that may run there and
   runs nowhere we can see is held as a stand-in (its GPUs counted, never a victim, and
   never the reason for an eviction: holds block new work, they do not evict) and
   listed as waiting with ``cluster-unreachable``; nothing is planned on that cluster
   (controlplane/unreachable.py). The other clusters are planned as usual.

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
   A project or department above a limit that was lowered gives preemptible work back
   down to it, victims as reclaim chooses them (minRuntime respected; what stand-ins hold
   is not given back for: solvers/kai/limits.py).
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
   a fan-out workload once one of them runs: the earliest started, then the cheaper, wins),
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
and shows the net actions (controlplane/converge.py); renamed projects hold what their
old names hold (specs/renames.py). Its time limit (``Policy.time_limit``, on the caller's
clock) bounds it all: CP-SAT, a step or a round stops where it is, and the plan lists what
was cut short. The spec part is built once per plan (per spec change, with a cache).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from controlplane import unreachable
from controlplane.converge import Round, converge
from controlplane.impact import cluster_prices
from controlplane.outrun import outrun_candidates
from controlplane.placements import placements, prunes, queued_waits, submits_told, unlisted
from controlplane.plan import Plan, QueueStatus, SolverReport, nodes_removed, plan_id, refused
from controlplane.quotas import quota_tables
from controlplane.sequence import sort_actions
from solvers.allocation import Allocation, allocate_best
from solvers.drift import Drift, finished_edits, reconcile_drift
from solvers.fanout import Estimate, plan_fan_out
from solvers.kai.allocate import Allocator, allocate, usage_wait
from solvers.kai.consolidate import consolidate
from solvers.kai.disruption import Ledger, restore_displaced
from solvers.kai.handover import settle
from solvers.kai.limits import enforce_limits
from solvers.kai.preempt import preempt
from solvers.kai.protection import Protected, leaving_wait, protected_work, protection_wait
from solvers.kai.reclaim import reclaim
from solvers.kai.swap import swap_homes
from solvers.kai.unmovable import Unmovable
from solvers.policy import DEFAULT_POLICY, Deadline, Policy
from solvers.problem import JobRequest, Problem, ProblemCache, held_now
from solvers.session import Session
from solvers.sitepolicy.preamble import planning_problem
from solvers.sitepolicy.usage import fairshare_inputs
from specs.actions import Pending, Reason, ReasonCode
from specs.desired import DesiredState
from specs.kubernetes import what_runs
from specs.observation import observed_digest
from specs.renames import carried_over, tagged
from specs.snapshot import Snapshot

VIRTUAL_DIGEST = "virtual"  # the observed digest of a round planned on the virtual world


def plan(
    desired: DesiredState,
    observed: Snapshot,
    *,
    now: datetime,
    policy: Policy = DEFAULT_POLICY,
    git_commit: str | None = None,
    forecasts: Mapping[str, Estimate] | None = None,
    clock: Callable[[], float] | None = None,
    cache: ProblemCache | None = None,
    progress: Callable[[str], None] | None = None,
) -> Plan:
    """The plan: KAI cycles (steps 1-11 in :func:`cycle`) run to a fixed point on a virtual
    copy of the world (controlplane/converge.py), shown as the net actions.

    ``forecasts``: the estimated start of fan-out candidates by ``Candidate.key``
    (solvers/fanout/; gathered by controlplane/forecast.py); without them fan-out
    candidates rank by cost alone. ``clock`` (monotonic seconds) makes
    ``policy.time_limit`` bound the whole plan: when it runs out, the plan reached so far
    is returned and its solver report lists the steps cut short. ``cache`` keeps what the
    problem takes from the specs between plans of one process (``cp watch``); the rounds of
    one plan share it anyway. ``progress`` hears where a long plan stands (round and step);
    it changes nothing in the plan."""
    deadline = Deadline(policy.time_limit, clock, progress)
    digest = observed_digest(observed)  # of what the clusters report, as apply checks it
    observed = carried_over(desired, observed)  # renamed projects take their jobs and usage
    # a cluster that did not answer: what may run there is held as it is (unreachable.py)
    with_gone, gone = unreachable.with_gone(desired, observed)
    holds = {**unreachable.held(desired, observed), **gone}
    wanted, world0 = unreachable.stand_in(with_gone, observed, holds)
    # stand-ins change workloads under the same spec digest: no cache shared with others
    cache = cache if cache is not None and not holds else ProblemCache()
    started = frozenset(
        j.workload for c in world0.clusters for j in c.jobs if j.workload and j.state.holds_gpus
    )
    done = converge(
        lambda world: cycle(
            wanted,
            world,
            now=now,
            policy=policy,
            git_commit=git_commit,
            forecasts=forecasts,
            deadline=deadline,
            # the virtual world's rounds are never shown: no digest of their own
            digest=digest if world is world0 else VIRTUAL_DIGEST,
            cache=cache,
            started=None if world is world0 else started,
        ),
        world0,
        now,
        deadline,
    )
    solver = done.first.report.model_copy(update={"cut_short": list(deadline.cut_short)})
    if done.rounds == 1 or done.actions is done.first.actions:
        first = done.first.finish().model_copy(update={"solver": solver})
        return _held(first, with_gone, holds, observed, gone)
    actions = sort_actions(done.actions, observed)
    last = done.last.finish()
    projects, departments = done.first.held_by_name()
    return _held(
        last.model_copy(
            update={
                "id": plan_id(desired.digest, digest, actions, now),
                "observed_digest": digest,
                "actions": actions,
                "solver": solver,
                # held now: what the observed world holds, not the last virtual round
                "projects": _held_now(last.projects, projects),
                "departments": _held_now(last.departments, departments),
            }
        ),
        with_gone,
        holds,
        observed,
        gone,
    )


def _held_now(after: dict[str, QueueStatus], held: dict[str, float]) -> dict[str, QueueStatus]:
    return {name: q.model_copy(update={"held": held.get(name, 0)}) for name, q in after.items()}


def _held(
    plan: Plan,
    desired: DesiredState,
    holds: dict[str, list[str]],
    observed: Snapshot,
    gone: dict[str, list[str]],
) -> Plan:
    """The plan says which nodes the specs remove with running work, which jobs are no
    victims for a failed eviction, which clusters did not answer, what waits for them, and
    how much of each queue's allocation is held for them (step 0). ``desired``: with the
    workloads that left the specs while their job ran there (``gone``)."""
    plan = plan.model_copy(
        update={"actions": tagged(plan.actions, observed), "nodes_removed": nodes_removed(observed)}
        | {"refused": refused(observed, plan.created_at)}
    )
    down = unreachable.unreachable(observed)
    if not down:
        return plan
    stranded = unreachable.stranded(desired, observed, {p.workload for p in plan.pending})
    kinds = dict.fromkeys(stranded, "stranded") | dict.fromkeys(gone, "gone")
    waits = unreachable.pending({**stranded, **holds}, kinds)
    pending = sorted(
        [p for p in plan.pending if p.workload not in holds and p.workload not in stranded] + waits,
        key=lambda p: p.workload,
    )
    pending = unreachable.with_silent_candidates(pending, observed)
    actions = unreachable.keep_away(plan.actions, observed)
    by_project, by_department = unreachable.held_gpus(desired, holds)

    def marked(queues: dict[str, QueueStatus], held: dict[str, float]) -> dict[str, QueueStatus]:
        return {
            name: q.model_copy(update={"unreachable": held[name]}) if name in held else q
            for name, q in queues.items()
        }

    return plan.model_copy(
        update={
            "actions": actions,
            "pending": pending,
            "unreachable": down,
            "projects": marked(plan.projects, by_project),
            "departments": marked(plan.departments, by_department),
        }
    )


def cycle(
    desired: DesiredState,
    observed: Snapshot,
    *,
    now: datetime,
    policy: Policy = DEFAULT_POLICY,
    git_commit: str | None = None,
    forecasts: Mapping[str, Estimate] | None = None,
    deadline: Deadline | None = None,
    digest: str | None = None,
    cache: ProblemCache | None = None,
    started: frozenset[str] | None = None,
) -> Round:
    """One KAI cycle against ``observed``: the steps narrated at the top of this module.
    ``digest``: the observed snapshot's. Step 11 runs when its plan is asked for (``Round.finish``).

    An edit whose new version does not fit beside its old job waits in the cycle as a new
    job would (solvers/drift.py); where the cycle does not place it, the cycle runs again
    with its old version kept: at most three runs, the third keeping every such edit's.
    ``started``: in a plan's later round, the workloads running when the plan began."""
    kept: dict[str, Reason | None] = {}  # edit -> why its new version was not placed
    while True:
        made = _cycle(
            desired,
            observed,
            now,
            policy,
            git_commit,
            forecasts,
            deadline or Deadline(),
            digest,
            cache,
            kept,
            started,
        )
        if isinstance(made, Round):
            return made
        tried, waits = made
        kept |= {k: waits.get(k) for k in tried} if kept else waits


def _cycle(
    desired: DesiredState,
    observed: Snapshot,
    now: datetime,
    policy: Policy,
    git_commit: str | None,
    forecasts: Mapping[str, Estimate] | None,
    deadline: Deadline,
    digest: str | None,
    cache: ProblemCache | None,
    kept: Mapping[str, Reason | None],
    started: frozenset[str] | None,
) -> Round | tuple[frozenset[str], dict[str, Reason | None]]:
    """:func:`cycle` once, with the edits in ``kept`` keeping their old version; or the
    edits tried as new jobs and, for those it did not place, why, to run it again."""
    deadline.at("reading the problem")
    # 1. the problem (segments finished or not), with site policy: budgets, retry backoff;
    #    fan-out workloads waiting for a start leave KAI's allocation
    problem = planning_problem(desired, observed, now, cache)
    problem.running_at_start = started
    problem.stand_ins = unreachable.stand_ins(observed)  # they keep work out, evict none
    #    running work whose spec was edited: in place, fewer replicas, or replaced now
    held = held_now(problem, observed)  # what runs now, before an edit reshapes it
    specs = {k: w.spec for k, w in desired.workloads.items()}
    drift = reconcile_drift(problem, observed, specs, now, held, kept, what_runs(desired))
    # 2-3. sessions over it (fair shares bent by usage), allocate with both engines
    fs = fairshare_inputs(problem, desired, observed.usage, now)
    deadline.at("allocating")
    chosen = allocate_best(
        problem,
        lambda: Session.open(problem, fs.usage, policy.k, fs.k),
        policy,
        deadline,
        shown=digest != VIRTUAL_DIGEST,  # a later round's solver report is never shown
    )
    session, allocator = chosen.session, chosen
    # 4-6. a queue above a lowered limit gives back down to it; then consolidate, reclaim,
    #    preempt: each commits its victims to the session
    ledger = Ledger()
    enforce_limits(session, ledger)
    for step in (consolidate, reclaim, preempt):
        step(
            session,
            ledger,
            search=policy.search,
            deadline=deadline,
            retry_twins=policy.retry_twins,
        )
    # 7. allocate what GPUs are left (KAI's next cycle, in this plan)
    deadline.at("allocating what is left")
    again = allocate(session, prefer=ledger.lost) if ledger.grants or ledger.lost else None
    swap_homes(session, ledger)  # victims on each other's old nodes keep their own instead
    restore_displaced(session, ledger)  # a later step may have freed an earlier victim's place
    served = settle(ledger, lambda key: bool(session.tasks.get(key)))  # whom evictions served
    unplaced = {k for k in drift.trials if not session.tasks.get(k)}
    if unplaced:
        found = _pending(problem, session, again or allocator, ledger, drift)
        why = {p.workload: p.reason for p in found if p.workload in unplaced}
        return frozenset(drift.trials), {k: why.get(k) for k in unplaced}
    # 8. actions
    grants = {**allocator.grants, **ledger.grants, **(again.grants if again else {})}
    actions = prunes(problem) + placements(desired, problem, session, grants, ledger, drift)
    # 9. fan-out: the quota gate, then the chosen candidates
    fan = plan_fan_out(problem, session, specs, forecasts)
    actions += fan.actions
    actions += outrun_candidates(actions, observed, problem.refused)  # freed for others
    # 10. checkpoint segments: KAI's submits ask for the next segment (fan-out's already do);
    #     a submit says what it follows (a failed job, an edit's cancelled old job)
    actions = submits_told(problem, observed, specs, actions)
    actions = sort_actions(actions, observed)  # a move may need the place another one leaves
    digest = digest if digest is not None else observed_digest(observed)
    report = SolverReport(
        engine=chosen.engine,
        status=chosen.status,
        objective=chosen.objective,
        bound=chosen.bound,
        gap=chosen.gap,
    )

    def finish() -> Plan:
        # 11. what waits, and the quota table
        pending = sorted(
            _pending(problem, session, again or allocator, ledger, drift) + fan.pending,
            key=lambda p: p.workload,
        )
        projects, departments = quota_tables(desired, problem, session, pending, held[0], drift)
        return Plan(
            # a later round's plan is shown under the id of the net actions (plan)
            id=VIRTUAL_DIGEST
            if digest == VIRTUAL_DIGEST
            else plan_id(desired.digest, digest, actions, now),
            created_at=now,
            spec_digest=desired.digest,
            git_commit=git_commit,
            observed_digest=digest,
            actions=actions,
            pending=pending,
            finished=[
                Pending(workload=k, reason=r)
                for k, r in finished_edits(problem, observed, specs).items()
            ],
            projects=projects,
            departments=departments,
            prices=cluster_prices(desired),
            solver=report,
        )

    def held_by_name() -> tuple[dict[str, float], dict[str, float]]:
        by_kind: dict[str, dict[str, float]] = {"project": {}, "department": {}}
        for qid, q in problem.queues.items():
            by_kind[q.kind][q.name] = held[0].get(qid, 0)
        return by_kind["project"], by_kind["department"]

    saving = {(r.cluster, r.job_id) for r in drift.replaced.values() if r.saves_first}
    return Round(
        actions, finish, report, held_by_name, held=session.held, saving=saving, gave_to=served
    )


def _pending(
    problem: Problem,
    session: Session,
    allocator: Allocator | Allocation,
    ledger: Ledger,
    drift: Drift,
) -> list[Pending]:
    # a waiting job a disruptive step placed no longer waits; its victims now do
    waits = {**allocator.pending, **ledger.waiting}
    protected_by, fixed = protected_work(session), Unmovable(session)  # once: every wait
    out = [
        Pending(
            workload=k, reason=_protected_wait(session, problem.jobs[k], r, protected_by, fixed)
        )
        for k, r in waits.items()
        if len(session.tasks.get(k, [])) < problem.jobs[k].min_replicas
    ]
    # an edited workload whose old version keeps running, unless it was taken back
    out += [
        Pending(workload=k, reason=r)
        for k, r in drift.waiting.items()
        if k not in waits and session.tasks.get(k)
    ]
    out += unlisted(problem, session, {*waits, *drift.waiting})  # what nothing else lists
    out += queued_waits(problem)  # jobs waiting in the clusters' own queues
    return sorted(out, key=lambda p: p.workload)


def _protected_wait(
    session: Session, job: JobRequest, reason: Reason, protected_by: Protected, fixed: Unmovable
) -> Reason:
    """A wait for room, or under a limit, that only minRuntime (or for room: the project's
    past usage, work winding down) causes says so, and a wait for room no eviction could
    make says what unmovable work holds it. MinRuntime first: a project above its fair
    share may not reclaim, but may still preempt its own lower-priority work once
    protection ends."""
    if reason.code is ReasonCode.OVER_LIMIT:
        return protection_wait(session, job, protected_by, at_limit=True) or reason
    if reason.code not in (ReasonCode.NO_CAPACITY, ReasonCode.GANG_UNPLACEABLE):
        return reason
    if (kept := protection_wait(session, job, protected_by)) is not None:
        return kept
    if (bent := usage_wait(session, job, reason)) is not reason:
        return bent
    leaving = leaving_wait(session, job, reason, protected_by)
    return fixed.wait(job, reason) if leaving is reason else leaving
