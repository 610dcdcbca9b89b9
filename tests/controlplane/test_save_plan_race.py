"""Two processes saving the first plan of a new store at once (seen on PostgreSQL: two
`cp plan --db` started together, one failed on a duplicate key). The race itself cannot
be timed from a test; here the losing insert is made to fail as PostgreSQL fails it, after
the other process saved the plan, and the retry must find the plan saved."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError

from controlplane.plan import Plan
from controlplane.store import Store
from controlplane.store.history import History

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "quickstart" / "plan.json"


def test_the_process_that_loses_the_race_finds_the_plan_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'cp.db'}"
    mine, other = Store(url, init=True), Store(url)
    plan = Plan.from_json(GOLDEN.read_text())
    insert = History._insert_plan
    tries: list[int] = []

    def losing(self: History, p: Plan) -> None:
        tries.append(1)
        if len(tries) == 1:  # the other process wins: it saves, this insert fails
            insert(other, p)
            raise IntegrityError("INSERT INTO plans", {}, Exception("duplicate key"))
        insert(self, p)

    monkeypatch.setattr(History, "_insert_plan", losing)
    mine.save_plan(plan)
    assert len(tries) == 2
    assert mine.get_plan(plan.id) is not None and len(mine.plans()) == 1
    assert mine.verify().ok


def test_an_insert_that_keeps_failing_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'cp.db'}", init=True)

    def failing(self: History, p: Plan) -> None:
        raise IntegrityError("INSERT INTO plans", {}, Exception("duplicate key"))

    monkeypatch.setattr(History, "_insert_plan", failing)
    with pytest.raises(IntegrityError):
        store.save_plan(Plan.from_json(GOLDEN.read_text()))
