"""The runs a plan reads from the store come back as recorded. Every plan reads all of
them (usage decays over the whole history), so they are read as the database's own values
and parsed here: the same runs as the typed ORM read, to the microsecond, on SQLite (and
on PostgreSQL: tests/integration/postgres)."""

from __future__ import annotations

from pathlib import Path

from controlplane.store import Store
from tests.builders.runs import fill, typed


def check_runs_read_as_recorded(store: Store) -> None:
    now = fill(store)
    read = sorted(store._rows(now, None), key=lambda r: (r.cluster, r.job, r.started_at))
    assert read == typed(store) and len(read) == 4
    assert all(r.started_at.tzinfo is not None and r.last_seen.tzinfo is not None for r in read)
    assert {r.job: r.retired for r in read} == {"1": False, "2": False, "3": False, "4": True}
    assert {r.job for r in read if r.ended_at is not None} == {"2", "3"}
    # of some workloads only, as the progress of checkpoint segments reads them
    some = store._rows(now, None, {"p/b", "q/c"})
    assert sorted(r.job for r in some) == ["2", "3"]


def test_runs_read_as_recorded_on_sqlite(tmp_path: Path) -> None:
    check_runs_read_as_recorded(Store(f"sqlite:///{tmp_path / 's.db'}", init=True))
