"""The steps every command shares, without the command line: load, observe, plan, apply.

``cp plan``, ``apply``, ``status``, ``explain`` and ``watch`` all make a plan the same
way; :func:`build_plan` is that way, written once. Nothing here prints or exits: errors
are the project's own exceptions, and the CLI (controlplane/cli/) decides how to show
them.

Who writes what:

- :func:`build_plan` (``cp plan``, status, explain) observes read-only: the clusters, the
  simulator's state and the store's scheduling memory are left as they were, whatever
  ``--now`` says; the plan itself is stored (``cp show`` finds it): ``cp plan`` starts
  a spec repo's store for it, explain keeps it only in a store that is there, and
  status (polled by dashboards) keeps none.
  No command that only reads creates a database (:func:`open_store`).
- :func:`apply_specs` and :func:`apply_saved` (``cp apply``, ``cp watch --auto-approve``)
  take the apply lease first, then observe (recording queue times, usage, completions,
  failures), plan or check the saved plan against the clusters, and act; the lease is
  released only when the last action is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from adapters.base import Adapter
from controlplane import apply as applying
from controlplane import collector, staleness
from controlplane.activity import busy, note
from controlplane.actor import actor
from controlplane.apply import REPLAN, ApplyReport, Approve, OnOutcome, run_plan
from controlplane.errors import (
    CheckoutBehindError,
    ControlPlaneError,
    LeaseHeldError,
    StateFileError,
)
from controlplane.forecast import gather
from controlplane.gitcommit import git_commit
from controlplane.impact import applied_diff
from controlplane.lease import holding_lease
from controlplane.lineage import behind
from controlplane.observe import adapters_for, observe
from controlplane.plan import Plan, PolicyDiff
from controlplane.reconcile import plan as make_plan
from controlplane.statedir import state_dir
from controlplane.statefiles import read_snapshot
from solvers.policy import DEFAULT_POLICY, Policy
from solvers.problem import ProblemCache
from specs.loader import LoadResult, load_specs
from specs.observation import Observation, observation_of
from specs.renames import carried_over
from specs.snapshot import Snapshot

if TYPE_CHECKING:  # the store (sqlalchemy) is imported only where it is opened
    from controlplane.store import Store

Clock = Callable[[], datetime]


# what problems take from the specs, kept between the plans of one process (cp watch):
# loaded specs carry a content digest
_PROBLEMS = ProblemCache()


def resolve_now(now: datetime | None) -> datetime:
    """``now`` as an aware time (a zone-less one is UTC); the clock when None."""
    if now is None:
        return datetime.now(UTC)
    return now if now.tzinfo else now.replace(tzinfo=UTC)


def clock(now: datetime | None) -> Clock:
    """A clock for the adapters: fixed at ``now`` when given, else the real one."""
    fixed = resolve_now(now) if now is not None else None
    return (lambda: fixed) if fixed else (lambda: datetime.now(UTC))


def load(spec_dir: Path) -> LoadResult:
    """Load and validate the specs of ``spec_dir`` (raises SpecError with every problem)."""
    if not spec_dir.is_dir():
        raise ControlPlaneError(f"{spec_dir} is not a directory of specs")
    try:
        with collector.building():
            return load_specs(spec_dir, cache_dir=spec_dir / ".cp" / "cache")
    finally:
        state_dir(spec_dir)  # the spec cache may have made it


def open_store(
    spec_dir: Path,
    db: str | None,
    *,
    init: bool = False,
    reading: bool = False,
    noting: bool = False,
    now: datetime | None = None,
) -> Store:
    """``--db`` when given, else SQLite under ``spec_dir/.cp/``; a ``spec_dir`` that is not
    there is refused (a typo must not read as an empty history).

    ``reading`` (a command that only reads: history, show, status, get, usage, explain,
    cost) creates no database: a SQLite file that is not there is an empty store in memory
    (:meth:`Store.absent`), so a folder without specs is left as it was and a deleted store
    is not replaced by an empty one. ``noting`` (``cp plan``, which keeps its plan record)
    starts the store of a spec repo (``.cp/`` exists) and without one has it in memory too.
    ``now`` (``--now``): what is recorded happens at that time, as the plan and the
    clusters see it, not on the wall clock."""
    from controlplane.store import Store, default_url, sqlite_file  # sqlalchemy, only here

    if not spec_dir.is_dir():
        raise ControlPlaneError(f"{spec_dir} is not a directory of specs")
    file = sqlite_file(db or default_url(spec_dir))
    if reading and file is not None and not file.exists() and (not db or file.parent.is_dir()):
        store = Store.absent(file)  # (--db in a folder that is not there: refused below)
    elif db:
        store = Store(db, init=init)
    elif noting and file is not None and not (spec_dir / ".cp").is_dir():
        store = Store.absent(file)
    else:
        store = Store(default_url(spec_dir), init=init, create_dir=True)
        state_dir(spec_dir)
    if now is not None:
        store.at(resolve_now(now))
    return store


# ------------------------------------------------------------------ plan


@dataclass(frozen=True)
class Survey:
    """The world as observed (or a snapshot file) and the plan made for it: what the
    read-only views (status, get, usage, explain) show. ``store`` is None with a snapshot
    file, which has no store behind it. ``observed``: the clusters as the plan saw them
    (before renamed projects took their jobs), whose digest it records."""

    snapshot: Snapshot
    plan: Plan
    store: Store | None
    observed: Snapshot

    @property
    def seen(self) -> Observation:
        """What the plan was made against: worked out only where it is kept with the plan
        (a read-only view never needs it)."""
        return observation_of(self.observed)


def survey(
    spec_dir: Path,
    loaded: LoadResult,
    *,
    observed: Path | None = None,
    now: datetime | None = None,
    db: str | None = None,
    forecast: bool = False,
    policy: Policy = DEFAULT_POLICY,
    noting: bool = False,
    record: bool = False,
) -> Survey:
    """Observe ``spec_dir``'s clusters read-only (or read a snapshot file) and plan for it;
    nothing is written anywhere but with ``record``.

    ``forecast``: ask the clusters for fan-out candidates' start estimates (never with
    ``observed``: a snapshot file has no cluster behind it). ``noting``: the plan is to be
    kept (``cp plan``), in a store started for it if need be (see :func:`open_store`).
    ``record``: what is observed is recorded, under the apply lease, as ``cp observe``
    records it (a ``cp watch`` that does not apply: the store learns of edits and ended
    jobs at the first observation that sees them), unless somebody applies meanwhile."""
    if observed is not None:
        saved = read_snapshot(observed)
        when = resolve_now(now) if now is not None else saved.now
        plan = plan_for(spec_dir, loaded, saved, when, None, policy)
        return Survey(carried_over(loaded.desired, saved), plan, None, saved)
    when = resolve_now(now)
    store = open_store(spec_dir, db, reading=not (noting or record), noting=noting)
    adapters = adapters_for(
        loaded.desired, spec_dir / ".cp", clock(now), read_only=not record, db=db
    )
    snap: Snapshot | None = None
    if record:
        try:  # while somebody applies, it observes as a plan does: the apply records
            with holding_lease(store, observing=True):
                snap = observe(loaded.desired, adapters, when, store, record=True)
        except LeaseHeldError:
            adapters = adapters_for(
                loaded.desired, spec_dir / ".cp", clock(now), read_only=True, db=db
            )
    if snap is None:
        snap = observe(loaded.desired, adapters, when, store, record=False)
    plan = plan_for(spec_dir, loaded, snap, when, adapters if forecast else None, policy)
    plan = with_policy(plan, applied_diff(store.last_applied_plan(), plan))
    return Survey(carried_over(loaded.desired, snap), plan, store, snap)  # as the plan saw it


def build_plan(
    spec_dir: Path,
    loaded: LoadResult,
    *,
    observed: Path | None = None,
    now: datetime | None = None,
    db: str | None = None,
    forecast: bool = False,
    policy: Policy = DEFAULT_POLICY,
    keep: bool = True,
    record: bool = False,
) -> Plan:
    """Plan ``spec_dir`` against the clusters (observed now, read-only but with ``record``,
    see :func:`survey`) or a snapshot file. A plan made against the clusters is stored
    when ``keep``, the store started for it if need be (``cp show`` and ``cp apply
    --reviewed`` find it; a watch that does not apply keeps each decision once instead,
    :func:`named_once`)."""
    return plan_and_snapshot(
        spec_dir,
        loaded,
        observed=observed,
        now=now,
        db=db,
        forecast=forecast,
        policy=policy,
        keep=keep,
        noting=keep,
        record=record,
    )[0]


def named_once(spec_dir: Path, plan: Plan, *, db: str | None = None) -> Plan:
    """The stored plan a loop that does not apply names for ``plan``: the last one applied
    when ``plan`` repeats it, the newest one stored when ``plan`` decides as it, else
    ``plan``, stored now. So each decision is stored once, not once a cycle, and what a
    cycle's line names ``cp show`` finds."""
    store = open_store(spec_dir, db)
    with store:
        last = store.last_applied_plan()
        if last is not None and plan.repeats(last):
            return last.told_now(plan)
        if (twin := applying.unapplied_twin(store, plan)) is not None:
            return twin.told_now(plan)
        store.save_plan(plan)
    return plan


def plan_and_snapshot(
    spec_dir: Path,
    loaded: LoadResult,
    *,
    observed: Path | None = None,
    now: datetime | None = None,
    db: str | None = None,
    forecast: bool = False,
    policy: Policy = DEFAULT_POLICY,
    keep: bool = True,
    noting: bool = False,
    record: bool = False,
) -> tuple[Plan, Snapshot]:
    """:func:`build_plan`, and the snapshot it was made against (where things run now);
    with ``keep``, kept only in a store that is there unless ``noting`` (no read-only
    command creates a database for it)."""
    found = survey(
        spec_dir,
        loaded,
        observed=observed,
        now=now,
        db=db,
        forecast=forecast,
        policy=policy,
        noting=noting,
        record=record,
    )
    if found.store is not None:
        with found.store:
            if keep:  # with what it was made against: a plan file is applied later
                found.store.save_plan(found.plan)
                found.store.keep_observation(found.seen)
    return found.plan, found.snapshot


def with_policy(plan: Plan, diff: PolicyDiff | None) -> Plan:
    """``plan`` with the policy difference it is shown with, sealed again."""
    return plan if diff is None else plan.model_copy(update={"policy": diff}).sealed()


def plan_for(
    spec_dir: Path,
    loaded: LoadResult,
    snap: Snapshot,
    when: datetime,
    adapters: dict[str, Adapter] | None,
    policy: Policy,
) -> Plan:
    """The plan of ``loaded`` against ``snap``, sealed (``adapters``: to ask for fan-out
    candidates' start estimates)."""
    forecasts = gather(loaded.desired, snap, adapters, when) if adapters is not None else None
    commit = git_commit(spec_dir)
    started = time.perf_counter()
    with collector.planning(), busy(f"planning {len(loaded.desired.workloads):,} workloads"):
        plan = make_plan(
            loaded.desired,
            snap,
            now=when,
            git_commit=commit,
            forecasts=forecasts,
            policy=policy,
            clock=time.monotonic,
            cache=_PROBLEMS,
            progress=note,  # the round and step, beside the spinner's words
        )
    wall = round(time.perf_counter() - started, 4)
    solver = plan.solver.model_copy(update={"wall_seconds": wall})
    return plan.model_copy(update={"solver": solver}).sealed()


# ------------------------------------------------------------------ apply


def apply_specs(
    spec_dir: Path,
    loaded: LoadResult,
    *,
    now: datetime | None = None,
    db: str | None = None,
    policy: Policy = DEFAULT_POLICY,
    approve: Approve | None = None,
    progress: OnOutcome | None = None,
    stop: Callable[[], bool] | None = None,
    loop: bool = False,
) -> tuple[Plan, ApplyReport | None]:
    """Plan ``spec_dir`` and carry the plan out, all under the apply lease: observe
    (recording), plan, ask ``approve`` (it sees the plan and what it was made against;
    default: go ahead), act (``stop`` is asked before each action). Returns the plan and,
    if anything was done, the report. In a ``loop`` (``cp watch``), a plan that decides
    as the newest stored one, not applied, is that one (held back a cycle ago, say)."""
    applying.real_clock_only(loaded.desired, now)
    store = open_store(spec_dir, db, now=now)
    adapters = adapters_for(loaded.desired, spec_dir / ".cp", clock(now), db=db)
    when = resolve_now(now)
    with store, holding_lease(store) as lease:
        store.close_interrupted()
        last = store.last_applied_plan()
        # a clone that has not pulled yet would undo a newer commit's apply: it neither
        # acts nor records what it sees (its specs are not the ones the clusters follow)
        commit = git_commit(spec_dir)
        if (why := behind(spec_dir, loaded.desired.digest, commit, last, store)) is not None:
            raise CheckoutBehindError(f"{why}; nothing was done")
        snap = observe(loaded.desired, adapters, when, store, record=True)
        plan = plan_for(spec_dir, loaded, snap, when, adapters, policy)
        plan = with_policy(plan, applied_diff(last, plan))
        if last is not None and plan.repeats(last):
            # a loop with nothing to do: the store has this plan already, as the last one
            # applied (what is named is that one: `cp show` finds it), told as of now
            told = last.told_now(plan)
            if approve is not None:
                approve(told, snap, again=True)  # shown as every plan is; nothing to approve
            return told, None
        if loop and (twin := applying.unapplied_twin(store, plan)) is not None:
            plan = twin.told_now(plan)  # held back a cycle ago, say: named, not stored again
        else:
            store.save_plan(plan)
        approved = approve is None or approve(plan, snap)  # it sees every plan, may show it
        if approved and plan.empty:
            # the clusters follow these specs: the policy baseline of the next plans, and
            # what an interrupted apply left is not to be finished any more
            store.set_plan_status(plan.id, "applied", "nothing to do", actor=actor())
            store.supersede(by=plan.id)
        if not approved or plan.empty:
            return plan, None
        # planned under this lease: nobody else can have changed the clusters
        seen = then = None
        if not lease.regained():  # unless it lapsed meanwhile (a long approval): look again
            applying.not_overtaken(store, plan, last)
            seen = observation_of(observe(loaded.desired, adapters, resolve_now(now), store))
            then = observation_of(snap)
        report = run_plan(
            plan,
            adapters,
            store,
            observed=seen,
            made_against=then,
            progress=progress,
            lease=lease,
            stop=stop,
        )
    return plan, report


def apply_saved(
    plan: Plan,
    spec_dir: Path,
    loaded: LoadResult,
    *,
    now: datetime | None = None,
    db: str | None = None,
    progress: OnOutcome | None = None,
    stop: Callable[[], bool] | None = None,
    replan: str = REPLAN,
    reviewed: bool = False,
) -> ApplyReport:
    """Carry out a saved plan under the apply lease, refused if the clusters moved on
    since it was made in a way its actions depend on (controlplane/staleness.py; unless it
    resumes an interrupted apply of the same plan), saying ``replan``; ``stop`` is asked
    before each action. A ``reviewed`` plan (on merge) whose specs another plan applied
    meanwhile (a watch that pulled the merge first) is not run: the clusters follow those
    specs already."""
    applying.real_clock_only(loaded.desired, now)
    staleness.not_ahead(plan, resolve_now(now), replan)
    store = open_store(spec_dir, db, now=now)
    stored = store.get_plan(plan.id)
    if stored is not None and stored.digest is not None and not stored.same_plan(plan):
        raise StateFileError(
            f"plan {plan.id} differs from the plan of that id the store "
            "recorded when it was made; nothing was applied"
        )
    adapters = adapters_for(loaded.desired, spec_dir / ".cp", clock(now), db=db)
    with store, holding_lease(store) as lease:
        store.close_interrupted(except_plan=plan.id)
        if reviewed and (other := _followed(store, plan)) is not None:
            return ApplyReport(plan.id, followed_by=other)
        snap = observe(loaded.desired, adapters, resolve_now(now), store, record=True)
        return run_plan(
            plan,
            adapters,
            store,
            observed=observation_of(snap),
            progress=progress,
            lease=lease,
            stop=stop,
            replan=replan,
        )


def _followed(store: Store, plan: Plan) -> str | None:
    """The plan, other than ``plan`` (never applied), that applied the same specs to the
    end and is the one the clusters follow now; None if there is none."""
    if store.plan_status(plan.id) != "planned":
        return None  # applied already, or cut short: run_plan says so, or resumes it
    last = store.last_applied_plan()
    if last is None or last.id == plan.id or last.spec_digest != plan.spec_digest:
        return None
    return last.id if store.plan_status(last.id) == "applied" else None
