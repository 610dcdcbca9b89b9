"""The store on a real PostgreSQL: the whole plan/apply/history cycle, and the leader lease
that keeps two reconcilers sharing one database from applying at once."""

from __future__ import annotations

import shutil
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from controlplane.store import Store
from tests.builders.cli import cp
from tests.controlplane import test_rollups as rollups
from tests.controlplane.test_runs_read import check_runs_read_as_recorded

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.postgres


@pytest.fixture
def db(postgres_url: str) -> str:
    store = Store(postgres_url, init=True)  # a PostgreSQL store is initialised on purpose
    with store.engine.begin() as conn:  # each test starts from empty tables
        conn.execute(
            text(
                "TRUNCATE plans, actions, events, queue, placeholders, leases, "
                "completions, runs, failures, rollups, pruned_plans CASCADE"
            )
        )
        conn.execute(
            text(
                "DELETE FROM meta WHERE key IN ('chain_head', 'chain_base') "
                "OR key LIKE 'accounting:%'"
            )
        )
    return postgres_url


def test_plan_apply_history_on_postgres(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    applied = cp(capsys, "apply", specs, "--auto-approve", "--db", db, "--json")
    assert applied.code == 0
    last = Store(db).last_applied_plan()  # by its apply event: a join PostgreSQL runs too
    assert last is not None and last.id == applied.json()["plan"]
    again = cp(capsys, "plan", specs, "--json", "--db", db)
    assert again.json()["actions"] == []
    hist = cp(capsys, "history", specs, "--db", db, "--json").json()
    assert len(hist) == 10 and all(h["status"] == "done" for h in hist)
    assert not (specs / ".cp" / "controlplane.db").exists(), "nothing went to the SQLite default"
    # a second reconciler (another checkout) sees the same history
    other = tmp_path / "other"
    shutil.copytree(ROOT / "examples" / "quickstart", other, ignore=shutil.ignore_patterns(".cp"))
    assert len(cp(capsys, "history", other, "--db", db, "--json").json()) == 10
    # the filters, as PostgreSQL runs them (a time against the stored UTC, a name prefix)
    at = datetime.fromisoformat(hist[-1]["at"])
    for since, count in ((at - timedelta(minutes=1), 10), (at + timedelta(hours=1), 0)):
        rows = cp(capsys, "history", specs, "--db", db, "--json", "--since", since.isoformat())
        assert len(rows.json()) == count
    nlp = cp(capsys, "history", specs, "--db", db, "--json", "--project", "nlp").json()
    assert nlp and all(h["workload"].startswith("nlp/") for h in nlp)


def test_prune_on_postgres(db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Events and actions go before the plans they refer to (PostgreSQL enforces it), and
    the plans stored compressed read back."""
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    first = datetime(2026, 10, 1, tzinfo=UTC)
    assert (
        cp(capsys, "apply", specs, "--auto-approve", "--db", db, "--now", first.isoformat()).code
        == 0
    )
    shutil.rmtree(specs / "workloads")
    (specs / "workloads").mkdir()
    later = (first + timedelta(days=1)).isoformat()
    assert cp(capsys, "apply", specs, "--auto-approve", "--db", db, "--now", later).code == 0
    shutil.copy(ROOT / "examples" / "quickstart" / "workloads" / "nlp.yaml", specs / "workloads")
    last = cp(capsys, "apply", specs, "--auto-approve", "--db", db, "--json")
    assert last.code == 0
    pruned = cp(capsys, "store", "prune", specs, "--db", db, "--older-than", "1d", "--json")
    assert pruned.code == 0 and pruned.json()["plans"] == 2, pruned.out + pruned.err
    verdict = cp(capsys, "history", specs, "--db", db, "--verify", "--json").json()
    assert verdict["ok"] is True and verdict["prunedThrough"] == pruned.json()["through"]
    shown = cp(capsys, "show", last.json()["plan"], specs, "--db", db, "--json")
    assert shown.code == 0 and shown.json()["id"] == last.json()["plan"]


def test_only_one_reconciler_holds_the_lease(db: str) -> None:
    stores = [Store(db) for _ in range(8)]
    winners: list[str] = []
    barrier = threading.Barrier(len(stores))

    def contend(i: int) -> None:
        barrier.wait()
        if stores[i].acquire_lease(f"reconciler-{i}") is None:
            winners.append(f"reconciler-{i}")

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    holder = winners[0]
    loser = next(f"reconciler-{i}" for i in range(8) if f"reconciler-{i}" != holder)
    assert holder in (Store(db).acquire_lease(loser) or "")
    assert Store(db).acquire_lease(holder) is None, "the holder renews"
    Store(db).release_lease(holder)
    assert Store(db).acquire_lease(loser) is None, "released: the next one takes it"


def test_expired_lease_is_taken_over(db: str) -> None:
    from datetime import datetime, timedelta

    store = Store(db)
    past = datetime.now(UTC) - timedelta(hours=1)
    assert store.acquire_lease("crashed", ttl=60, now=past) is None
    assert store.acquire_lease("fresh") is None, "a crashed holder's lease expires"


def test_runs_read_as_recorded_on_postgres(db: str) -> None:
    """The runs read as the driver's own values (tests/controlplane/test_runs_read.py)."""
    check_runs_read_as_recorded(Store(db))


def test_rollups_on_postgres(db: str) -> None:
    """Roll-ups made and read on PostgreSQL (tests/controlplane/test_rollups.py)."""
    store = Store(db)
    rollups.fill(store)
    plain = store.usage_records(rollups.NOW)
    assert store.usage_records(rollups.NOW, None, rollups.HALF_LIVES) == plain
    read = store.usage_records(rollups.NOW, None, rollups.HALF_LIVES)
    assert any(r.started_at is None for r in read)
    rollups.assert_same_usage(read, plain, rollups.NOW)
