"""Apply: carry out a plan's actions through the adapters, recording each step.

Safe to interrupt at any point and run again:

1. A fresh plan is refused if the clusters have moved on since it was made (stale) in a
   way its actions depend on (controlplane/staleness.py: a job of ours that ended elsewhere
   only frees GPUs).
   A plan whose apply was interrupted resumes instead: its finished actions are skipped;
   unless a fresh plan has been applied since, which supersedes it (it was made from the
   world the interrupted one left, so the rest of the old one no longer holds).
2. Actions run in execution order (evictions before the submissions that need them).
   Each is marked ``started`` before and ``done``/``failed`` after, committed at once.
3. Adapters are idempotent: a submit finds the job already created for the same workload
   spec (jobs are tagged with workload, spec digest and plan id), a cancel of a job
   already gone is done.
4. One reconciler acts at a time, end to end: a lease (controlplane/lease.py) is taken
   before observing and planning and held until the last action is recorded.
5. A failure stops what may depend on it (:class:`HeldBack`): the rest of its cluster,
   and the workloads with an action there; the other clusters' actions go on. Nothing
   is marked done that wasn't; the next apply finishes the job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from adapters.base import TEMPORARY, Adapter, AdapterError, Preflight
from controlplane import staleness
from controlplane.activity import busy
from controlplane.actor import actor
from controlplane.errors import ApplyError, StalePlanError
from controlplane.lease import Lease, holding_lease
from controlplane.plan import Plan
from specs.actions import Action, Op
from specs.desired import DesiredState
from specs.observation import Observation
from specs.snapshot import Snapshot

if TYPE_CHECKING:  # the store (sqlalchemy) is imported only where it is opened
    from controlplane.store import Store


@dataclass
class ActionOutcome:
    seq: int
    action: Action
    status: str  # done | failed | skipped (done earlier) | held (after a failure: not run)
    job: str | None = None
    message: str = ""


@dataclass
class ApplyReport:
    plan_id: str
    outcomes: list[ActionOutcome] = field(default_factory=list)
    resumed: bool = False
    stopped: bool = False  # asked to stop before the end: the plan is interrupted
    already_applied: bool = False  # applied to the end before: nothing was run again
    followed_by: str | None = None  # another plan of the same specs was applied: not run
    pruned: bool = False  # applied before, and its history pruned since (cp store prune)
    # changes in the clusters since the plan was made that it does not depend on
    unaffected: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[ActionOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def ok(self) -> bool:
        return not self.failed


OnOutcome = Callable[[ActionOutcome], None]  # told of each action as it finishes


class Approve(Protocol):
    """Shown a plan and its observation: go ahead? ``again``: it is the plan last applied,
    told as of now (nothing new to do; the store has it)."""

    def __call__(self, plan: Plan, observed: Snapshot, *, again: bool = False) -> bool: ...


def not_overtaken(store: Store, plan: Plan, seen: Plan | None) -> None:
    """A plan whose lease lapsed before it acted (a long approval) no longer holds if
    another plan was applied meanwhile: the specs may have changed (a revert merged)
    though the clusters look the same. ``seen``: the last applied plan when it was made."""
    last = store.last_applied_plan()
    if last is not None and last.id != (seen.id if seen is not None else None):
        raise StalePlanError(
            f"plan {last.id} was applied while it waited for approval, longer than the "
            f"apply lease; nothing was done: {REPLAN}"
        )


def unapplied_twin(store: Store, plan: Plan) -> Plan | None:
    """The newest stored plan, if nobody applied it and ``plan`` is the same decision (one
    the prune guard held back: every cycle of a loop would otherwise store a copy)."""
    newest = store.plans(limit=1)
    if not newest or newest[0].status != "planned":
        return None
    row = newest[0]
    if (row.spec_digest, row.observed_digest) != (plan.spec_digest, plan.observed_digest):
        return None  # another decision: its body (large in a big org) is not read
    stored = Plan.from_json(row.text)
    return stored if plan.decides_as(stored) else None


def apply_plan(
    plan: Plan,
    adapters: dict[str, Adapter],
    store: Store,
    *,
    observed: Observation | None,
    progress: OnOutcome | None = None,
) -> ApplyReport:
    """Take the lease and execute ``plan`` (see :func:`run_plan`)."""
    with holding_lease(store) as lease:
        return run_plan(plan, adapters, store, observed=observed, progress=progress, lease=lease)


def real_clock_only(desired: DesiredState, now: datetime | None) -> None:
    """``--now`` sets the clock of simulated clusters only: an apply acts on a real one,
    and the history records it, at the real time (a made-up clock would evict work inside
    its minRuntime and write the future into the history)."""
    real = sorted(
        f"{name} ({c.spec.adapter})"
        for name, c in desired.clusters.items()
        if c.spec.adapter != "simulator"
    )
    if now is not None and real:
        raise ApplyError(
            f"--now sets the clock of simulated clusters only; {', '.join(real)} "
            f"act{'s' if len(real) == 1 else ''}, and {'is' if len(real) == 1 else 'are'} "
            "recorded, at the real time: apply without --now"
        )


REPLAN = "run `cp plan` again"  # how a stale plan is told to get a fresh one


def run_plan(
    plan: Plan,
    adapters: dict[str, Adapter],
    store: Store,
    *,
    observed: Observation | None,
    made_against: Observation | None = None,
    progress: OnOutcome | None = None,
    lease: Lease | None = None,
    stop: Callable[[], bool] | None = None,
    replan: str = REPLAN,
) -> ApplyReport:
    """Execute ``plan`` under a lease the caller holds. ``observed`` is the clusters right
    now (None: the plan was made a moment ago, under this lease), checked against what the
    plan was made against (``made_against``, else as the store kept it: see
    controlplane/staleness.py); ``replan`` says how to get a fresh plan when this one no
    longer holds;
    ``stop`` is asked before each action (a signal to stop: the plan is left interrupted,
    resumable)."""
    from controlplane.store.history import RESUMABLE  # loaded with the store given

    status = store.plan_status(plan.id)
    done = {r.seq for r in store.actions(plan.id) if r.status == "done"} if status else set()
    resumed = status in RESUMABLE or bool(done)
    if status == "applied":
        gone = store.pruned_plan(plan.id) is not None
        return ApplyReport(plan.id, already_applied=True, pruned=gone)
    if status == "superseded":
        raise StalePlanError(
            f"plan {plan.id} stopped before it finished, and {store.status_message(plan.id)}"
            f": its remaining actions no longer hold; {replan}"
        )
    unaffected = []
    if not resumed and observed is not None and observed.digest != plan.observed_digest:
        kept = made_against is None
        then = store.observation(plan.observed_digest) if kept else made_against
        unaffected = staleness.check(plan, then, observed, replan)
    report = _run(plan, adapters, store, done, resumed, progress, lease, stop)
    report.unaffected = unaffected
    return report


def _run(
    plan: Plan,
    adapters: dict[str, Adapter],
    store: Store,
    done: set[int],
    resumed: bool,
    progress: OnOutcome | None,
    lease: Lease | None,
    stop: Callable[[], bool] | None,
) -> ApplyReport:
    store.save_plan(plan)
    store.set_plan_status(plan.id, "applying", actor=actor())
    if not resumed:  # made from the world they left: theirs is not to finish any more
        store.supersede(by=plan.id)
    report = ApplyReport(plan.id, resumed=resumed)
    if _refused(plan, adapters, store, done, report, progress):
        store.set_plan_status(plan.id, "failed")
        return report
    order = plan.execution_order()
    held = HeldBack(order)
    for seq, action in enumerate(order):
        if seq in done:
            report.outcomes.append(ActionOutcome(seq, action, "skipped", message="done earlier"))
            continue
        if (why := held.why(action)) is not None:
            report.outcomes.append(outcome := ActionOutcome(seq, action, "held", message=why))
            if progress:
                progress(outcome)
            continue
        if stop is not None and stop():  # asked to stop (SIGTERM): after the action before
            report.stopped = True
            store.set_plan_status(
                plan.id,
                "interrupted",
                f"stopped on request before action {seq}; rerun the plan to resume it",
            )
            return report
        if lease is not None:
            lease.keep()
        store.mark(plan.id, seq, "started")
        try:
            adapter = adapters[action.cluster]
            with busy(f"{action.op.value} {action.workload} on {action.cluster}"):
                result = adapter.execute(action, plan_id=plan.id)
        except (AdapterError, KeyError) as exc:
            retry = TEMPORARY if getattr(exc, "retryable", False) else ""
            _failed(
                store, plan, seq, action, f"{type(exc).__name__}: {exc}{retry}", report, progress
            )
            held.fail(action)
            continue
        store.mark(
            plan.id, seq, "done" if result.ok else "failed", job=result.job, message=result.message
        )
        if result.ok and result.job and _creates_job(action, result.job):
            store.add_placeholder(action.workload, action.cluster, result.job, plan.id)
        elif result.ok and action.op in (Op.CANCEL, Op.PREEMPT) and action.job:  # gone for good
            store.drop_placeholder(action.workload, action.cluster, job=action.job)
            store.stopped(action.cluster, action.job)
        outcome = ActionOutcome(
            seq, action, "done" if result.ok else "failed", result.job, result.message
        )
        report.outcomes.append(outcome)
        if progress:
            progress(outcome)
        if not result.ok:
            held.fail(action)
    store.set_plan_status(plan.id, "applied" if report.ok else "failed")
    return report


class HeldBack:
    """What a failed action holds back in the rest of an apply: every action on its
    cluster (an eviction that failed leaves no room for what was to start there), and
    every action of a workload with one there (a workload that moves to another cluster
    must not start there while its old job may still run). Actions of other workloads
    on other clusters go on: a job stuck on one cluster no longer holds up the rest."""

    def __init__(self, actions: list[Action]) -> None:
        self._workloads: dict[str, set[str]] = {}  # cluster -> workloads with an action there
        for action in actions:
            self._workloads.setdefault(action.cluster, set()).add(action.workload)
        self._clusters: dict[str, Action] = {}  # cluster -> its failed action
        self._held: dict[str, Action] = {}  # workload -> the failed action that holds it

    def fail(self, action: Action) -> None:
        self._clusters.setdefault(action.cluster, action)
        for workload in self._workloads.get(action.cluster, ()):
            self._held.setdefault(workload, action)

    def why(self, action: Action) -> str | None:
        """Why ``action`` is not run now (None: it runs)."""
        failed = self._clusters.get(action.cluster, self._held.get(action.workload))
        if failed is None:
            return None
        return (
            f"not run: it may depend on the {failed.op.value} of {failed.workload} on "
            f"{failed.cluster}, which failed; `cp apply` again runs it once that passes"
        )


def _refused(
    plan: Plan,
    adapters: dict[str, Adapter],
    store: Store,
    done: set[int],
    report: ApplyReport,
    progress: OnOutcome | None,
) -> bool:
    """Ask each adapter that can (``Preflight``) whether it could carry out the actions
    left for it; the first refusal is recorded on that cluster's first action left, and
    nothing is done anywhere."""
    todo: dict[str, list[tuple[int, Action]]] = {}
    for seq, action in enumerate(plan.execution_order()):
        if seq not in done:
            todo.setdefault(action.cluster, []).append((seq, action))
    for cluster, actions in todo.items():
        adapter = adapters.get(cluster)
        if not isinstance(adapter, Preflight):
            continue
        try:
            adapter.preflight([a for _, a in actions])
        except AdapterError as exc:
            seq, action = actions[0]
            _failed(store, plan, seq, action, f"{type(exc).__name__}: {exc}", report, progress)
            return True
    return False


def _failed(
    store: Store,
    plan: Plan,
    seq: int,
    action: Action,
    message: str,
    report: ApplyReport,
    progress: OnOutcome | None,
) -> None:
    """Record that action ``seq`` failed, in the store and the report, and tell it."""
    store.mark(plan.id, seq, "failed", message=message)
    outcome = ActionOutcome(seq, action, "failed", message=message)
    report.outcomes.append(outcome)
    if progress:
        progress(outcome)


def _creates_job(action: Action, job: str) -> bool:
    """A submit, or a move/resize the adapter did as a new job: it may pend for a while."""
    return action.op == Op.SUBMIT or (action.op in (Op.MOVE, Op.RESIZE) and job != action.job)
