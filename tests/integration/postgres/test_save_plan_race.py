"""Two processes saving plans at once on a store whose history chain has no head yet (seen
as a flaky `cp plan --db postgresql://…` pair: one failed on a duplicate key of the meta
table). Both find no head to lock, both insert one, and PostgreSQL refuses the second at
commit. The race is made to happen every time here: the other store saves its plan right
after this one has read the (missing) head and before it commits."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import Session

from controlplane.plan import Plan
from controlplane.store import Store, history
from controlplane.store.tables import EventRow, PlanRow
from tests.integration.postgres.test_store_postgres import db  # noqa: F401 (fixture)

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "quickstart" / "plan.json"
pytestmark = pytest.mark.postgres


def test_the_store_that_loses_the_race_for_the_first_head_saves_after_the_winner(
    db: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mine, other = Store(db), Store(db)
    plan = Plan.from_json(GOLDEN.read_text())
    theirs = plan.model_copy(update={"id": "0" * len(plan.id)})
    append = history._append
    raced: list[str] = []

    def racing(session: Session, row: PlanRow | EventRow, payload: dict) -> None:
        append(session, row, payload)
        if not raced:  # this one has read "no head": the other saves and commits first
            raced.append(row.id if isinstance(row, PlanRow) else "")
            other.save_plan(theirs)

    monkeypatch.setattr(history, "_append", racing)
    mine.save_plan(plan)
    assert raced == [plan.id]
    assert {p.id for p in mine.plans()} == {plan.id, theirs.id}
    verdict = mine.verify()
    assert verdict.ok, verdict.problem
    assert verdict.records == 2
