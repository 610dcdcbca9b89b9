"""Which failed actions the store counts as refused evictions (store/scheduling.py), on the
real store (SQLite): preempts, cancels, moves and shrinking resizes that failed in a row;
not a grow, not a failure a rerun may get past, not one before the job entered (review)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.base import TEMPORARY
from controlplane.plan import Plan, SolverReport
from controlplane.store import Store
from specs.actions import Action, Op, Reason, ReasonCode

T0 = datetime(2026, 11, 22, 10, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path}/db")


def attempt(
    store: Store,
    n: int,
    op: Op,
    ok: bool,
    *,
    code: ReasonCode = ReasonCode.RECLAIM,
    message: str = "Access/permission denied",
) -> None:
    """Plan ``n`` (at T0 + n minutes) acts on job 7 of sim, and succeeds or fails."""
    store.at(T0 + n * MINUTE)
    action = Action(
        op=op, workload="a/w", cluster="sim", job="7", reason=Reason(code=code, message="x")
    )
    plan = Plan(
        id=f"p{n}",
        created_at=T0 + n * MINUTE,
        spec_digest="s",
        observed_digest="o",
        actions=[action],
        solver=SolverReport(engine="kai-greedy", status="HEURISTIC"),
    )
    store.save_plan(plan)
    store.mark(plan.id, 0, "started")
    store.mark(plan.id, 0, "done" if ok else "failed", message="" if ok else message)


def counts(store: Store, since: datetime | None = None) -> list[tuple[str, int]]:
    return [(r.op, r.count) for r in store.refusals({("sim", "7"): since})]


def test_failures_in_a_row_count_and_a_success_ends_the_streak(store: Store) -> None:
    attempt(store, 1, Op.PREEMPT, ok=False)
    attempt(store, 2, Op.CANCEL, ok=False, code=ReasonCode.PRUNE)
    assert counts(store) == [("cancel", 2)]
    [refusal] = store.refusals({("sim", "7"): None, ("sim", "8"): None})
    assert (
        refusal.at.replace(microsecond=0) == T0 + 2 * MINUTE
        and refusal.message == "Access/permission denied"
    )
    attempt(store, 3, Op.PREEMPT, ok=True)
    assert counts(store) == []
    attempt(store, 4, Op.MOVE, ok=False, code=ReasonCode.CONSOLIDATE)
    assert counts(store) == [("move", 1)]
    assert store.refusals({("sim", "8"): None}) == [], "another job"


def test_a_grow_a_temporary_failure_and_an_earlier_job_of_the_same_id_are_no_refusals(
    store: Store,
) -> None:
    attempt(store, 1, Op.RESIZE, ok=False, code=ReasonCode.ELASTIC_EXPAND)  # a grow
    attempt(store, 2, Op.PREEMPT, ok=False, message=f"TemporaryError: refused{TEMPORARY}")
    assert counts(store) == []
    attempt(store, 3, Op.RESIZE, ok=False, code=ReasonCode.ELASTIC_SHRINK)  # gives back
    assert counts(store) == [("resize", 1)]
    # the cluster gave id 7 again to a job that entered after those failures
    assert counts(store, since=T0 + 5 * MINUTE) == []
