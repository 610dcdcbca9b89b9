"""Apply: carry out a plan's actions through the adapters, recording each step.

Safe to interrupt at any point and run again:

1. A fresh plan is refused if the clusters have moved on since it was made (stale).
   A plan whose apply was interrupted resumes instead: its finished actions are skipped.
2. Actions run in execution order (evictions before the submissions that need them).
   Each is marked ``started`` before and ``done``/``failed`` after, committed at once.
3. Adapters are idempotent: a submit finds the job its own plan already created (jobs are
   tagged with workload and plan id), a cancel of a job already gone is done.
4. One reconciler applies at a time: a lease in the store (shared PostgreSQL when several
   reconcilers run) is held for the duration. A lease left by a process of this host
   that has died (killed mid-apply) is taken over at once rather than after it expires.
5. The first failure stops the run: later actions may depend on it. Nothing is marked
   done that wasn't; the next apply finishes the job.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from adapters.base import Adapter, AdapterError
from controlplane.errors import LeaseHeldError, StalePlanError
from controlplane.plan import Plan
from controlplane.store import Store
from specs.actions import Action, Op


@dataclass
class ActionOutcome:
    seq: int
    action: Action
    status: str  # done | failed | skipped
    job: str | None = None
    message: str = ""


@dataclass
class ApplyReport:
    plan_id: str
    outcomes: list[ActionOutcome] = field(default_factory=list)
    resumed: bool = False

    @property
    def failed(self) -> list[ActionOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def ok(self) -> bool:
        return not self.failed


Progress = Callable[[ActionOutcome], None]


def apply_plan(
    plan: Plan,
    adapters: dict[str, Adapter],
    store: Store,
    *,
    observed_digest: str | None,
    progress: Progress | None = None,
) -> ApplyReport:
    """Execute ``plan``. ``observed_digest`` is the clusters' digest right now (None: not checked)."""
    status = store.plan_status(plan.id)
    done = {r.seq for r in store.actions(plan.id) if r.status == "done"} if status else set()
    resumed = status in ("applying", "failed") or bool(done)
    if status == "applied":
        return ApplyReport(plan.id, resumed=True)
    if not resumed and observed_digest is not None and observed_digest != plan.observed_digest:
        raise StalePlanError(
            f"plan {plan.id} was made against another state of the clusters "
            "(jobs or nodes changed since); run `cp plan` again"
        )
    holder = f"{socket.gethostname()}:{os.getpid()}"
    if (other := store.acquire_lease(holder)) is not None:
        dead = store.lease_holder()
        if dead is None or not _dead_here(dead) or store.acquire_lease(holder, takeover=dead):
            raise LeaseHeldError(f"another reconciler is applying ({other}); try again later")
    try:
        return _run(plan, adapters, store, done, resumed, progress)
    finally:
        store.release_lease(holder)


def _run(plan: Plan, adapters: dict[str, Adapter], store: Store, done: set[int], resumed: bool,
         progress: Progress | None) -> ApplyReport:
    store.save_plan(plan)
    store.set_plan_status(plan.id, "applying")
    report = ApplyReport(plan.id, resumed=resumed)
    for seq, action in enumerate(plan.execution_order()):
        if seq in done:
            report.outcomes.append(ActionOutcome(seq, action, "skipped", message="done earlier"))
            continue
        store.mark(plan.id, seq, "started")
        try:
            adapter = adapters[action.cluster]
            result = adapter.execute(action, plan_id=plan.id)
        except (AdapterError, KeyError) as exc:
            retry = " (temporary: rerun `cp apply` to continue)" if getattr(exc, "retryable", False) else ""
            message = f"{type(exc).__name__}: {exc}{retry}"
            store.mark(plan.id, seq, "failed", message=message)
            outcome = ActionOutcome(seq, action, "failed", message=message)
            report.outcomes.append(outcome)
            if progress:
                progress(outcome)
            break
        store.mark(plan.id, seq, "done" if result.ok else "failed", job=result.job, message=result.message)
        if result.ok and result.job and _creates_job(action, result.job):
            store.add_placeholder(action.workload, action.cluster, result.job, plan.id)
        outcome = ActionOutcome(seq, action, "done" if result.ok else "failed", result.job, result.message)
        report.outcomes.append(outcome)
        if progress:
            progress(outcome)
        if not result.ok:
            break
    store.set_plan_status(plan.id, "applied" if report.ok else "failed")
    return report


def _creates_job(action: Action, job: str) -> bool:
    """A submit, or a move/resize the adapter did as a new job: it may pend for a while."""
    return action.op == Op.SUBMIT or (action.op in (Op.MOVE, Op.RESIZE) and job != action.job)


def _dead_here(holder: str) -> bool:
    """``holder`` ("host:pid") is a process of this host that no longer runs.

    Only this host's processes can be checked; a holder elsewhere keeps its lease until
    it expires. A zombie counts as dead: it can never release the lease itself.
    """
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "Z"
