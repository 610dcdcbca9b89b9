"""Roll-ups: a plan reads the usage of old runs as one sum per project and price group, not
run by run, and gets the same usage. Every plan read every run the store ever recorded
(1.8 s at two months of a busy 300-node cluster, and growing for ever); the runs that ended
before now's month are now read as their roll-ups, made by a recorded read, and
set aside by anything that changes one of those runs."""

from __future__ import annotations

import random
import shutil
from collections import defaultdict
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, text

from controlplane.store import Store
from controlplane.store.rollups import through_for
from controlplane.store.tables import RunRow
from solvers.sitepolicy.budgets import usage_this_month
from solvers.sitepolicy.usage import decayed_gpu_hours
from specs.snapshot import JobRun, JobState, UsageRecord
from tests.builders.cli import cp, ok

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
HALF_LIVES = {"p0": 7 * 86_400, "p1": 2 * 86_400, "p2": 30 * 86_400}


def fill(
    store: Store,
    count: int = 400,
    seed: int = 3,
    projects: tuple[str, ...] = ("p0", "p1", "p2", "p3"),
) -> None:
    """Runs over five months before NOW, some across a month's end, some still open, some
    without GPUs, on two clusters, at several prices."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for i in range(count):
        start = NOW - timedelta(seconds=rng.randrange(150 * 86_400))
        hours = rng.choice([1, 5, 30, 200])
        end = start + timedelta(hours=hours)
        project = projects[i % len(projects)]  # p3: no half-life given (not rolled up)
        rows.append(
            {
                "cluster": rng.choice(["east", "west"]),
                "job": str(i),
                "started_at": start,
                "workload": f"{project}/w{i % 7}",
                "project": project,
                "state": "COMPLETED",
                "ended_at": end if end < NOW and i % 13 else None,
                "gpus": rng.choice([0, 1, 2, 8]),
                "gpu_type": rng.choice(["a100", "h100", None]),
                "price": rng.choice([None, 1.5, 4.0]),
                "last_seen": min(end, NOW),
                "retired": False,
            }
        )
    with store.db.session() as db:
        db.execute(insert(RunRow), rows)
        db.commit()


def per_project(records: list[UsageRecord]) -> dict[str, list[UsageRecord]]:
    out: dict[str, list[UsageRecord]] = defaultdict(list)
    for r in records:
        out[r.project].append(r)
    return out


def assert_same_usage(rolled: list[UsageRecord], plain: list[UsageRecord], now: datetime) -> None:
    """The same decayed usage (plain and by price) and the same month, for every project."""
    a, b = per_project(rolled), per_project(plain)
    assert a.keys() == b.keys()
    for project, mine in a.items():
        half_life = HALF_LIVES.get(project, 7 * 86_400)
        for weight in (None, lambda r: r.price or 2.0):
            assert decayed_gpu_hours(mine, now, half_life, weight) == pytest.approx(
                decayed_gpu_hours(b[project], now, half_life, weight), rel=1e-12, abs=1e-12
            )
        month = usage_this_month(mine, now, lambda r: r.price or 2.0)
        assert month == usage_this_month(b[project], now, lambda r: r.price or 2.0)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    made = Store(f"sqlite:///{tmp_path / 's.db'}", init=True)
    fill(made)
    return made


def test_old_runs_are_read_as_their_rollups_with_the_same_usage(store: Store) -> None:
    plain = store.usage_records(NOW)
    first = store.usage_records(NOW, None, HALF_LIVES)  # reads every run, makes the roll-ups
    assert first == plain
    rolled = store.usage_records(NOW, None, HALF_LIVES)
    sums = [r for r in rolled if r.started_at is None]  # a roll-up's: one per price group
    assert len(sums) <= 3 * 2 * 3 * 3 and len(rolled) - len(sums) < 0.6 * len(plain)
    assert_same_usage(rolled, plain, NOW)
    later = NOW + timedelta(days=5)  # the same roll-ups, decayed further
    assert_same_usage(
        store.usage_records(later, None, HALF_LIVES), store.usage_records(later), later
    )
    # a project without a half-life given (p3) has none: its runs are read
    assert {r.project for r in rolled if r.started_at is None} == {"p0", "p1", "p2"}


def test_a_late_or_changed_run_sets_the_rollup_aside(store: Store) -> None:
    store.usage_records(NOW, None, HALF_LIVES)
    through = through_for(NOW)
    late = JobRun(
        job="late",
        workload="p1/w1",
        state=JobState.COMPLETED,
        started_at=through - timedelta(days=9),
        ended_at=through - timedelta(days=8),
        gpus=8,
        gpu_type="a100",
    )
    store.record_runs({"east": [late]}, NOW)  # an accounting report from long ago
    assert_same_usage(store.usage_records(NOW, None, HALF_LIVES), store.usage_records(NOW), NOW)
    # a run counted in a roll-up, reported again with another end
    with store.db.session() as db:
        cluster, job, start, end = db.execute(
            text(
                "SELECT cluster, job, started_at, ended_at FROM runs WHERE rolled AND gpus > 0 "
                "AND project = 'p0' ORDER BY job LIMIT 1"
            )
        ).one()
    start = datetime.fromisoformat(start).replace(tzinfo=UTC)
    end = datetime.fromisoformat(end).replace(tzinfo=UTC)
    again = JobRun(
        job=job,
        workload="p0/w0",
        state=JobState.COMPLETED,
        started_at=start,
        ended_at=end + timedelta(hours=3),
        gpus=2,
    )
    store.record_runs({cluster: [again]}, NOW, complete=[])  # nothing else changes
    assert_same_usage(store.usage_records(NOW, None, HALF_LIVES), store.usage_records(NOW), NOW)


def test_a_renamed_project_or_a_new_half_life_reads_the_runs(store: Store) -> None:
    store.usage_records(NOW, None, HALF_LIVES)
    store.carry_renames({f"p2/w{i}": f"p0/w{i}" for i in range(7)})  # p2's runs now p0's
    assert_same_usage(store.usage_records(NOW, None, HALF_LIVES), store.usage_records(NOW), NOW)
    store.usage_records(NOW, None, HALF_LIVES)  # made again
    slower = {**HALF_LIVES, "p1": 14 * 86_400}
    with_new = store.usage_records(NOW, None, slower)
    plain = store.usage_records(NOW)
    assert decayed_gpu_hours(per_project(with_new)["p1"], NOW, slower["p1"]) == pytest.approx(
        decayed_gpu_hours(per_project(plain)["p1"], NOW, slower["p1"]), rel=1e-12
    )


def test_a_read_only_plan_uses_rollups_and_writes_none(store: Store) -> None:
    store.usage_records(NOW, None, HALF_LIVES)
    through = through_for(NOW)
    with store.db.session() as db:
        cluster, job, start = db.execute(
            text(
                "SELECT cluster, job, started_at FROM runs WHERE rolled AND gpus > 0 "
                "AND project = 'p2' ORDER BY job LIMIT 1"
            )
        ).one()
        before = db.execute(text("SELECT count(*) FROM rollups")).scalar()
    seen: dict[str, list[JobRun]] = {
        "east": [
            JobRun(job="new", workload="p0/w0", started_at=NOW - timedelta(hours=2), gpus=4),
            # a run from before the month that no store holds: counted with p1's roll-up
            JobRun(
                job="old",
                workload="p1/w1",
                state=JobState.COMPLETED,
                started_at=through - timedelta(days=3),
                ended_at=through - timedelta(days=2),
                gpus=1,
            ),
        ]
    }
    # and one a roll-up counts, seen again with a later end: p2's runs are read instead
    again = JobRun(
        job=job,
        workload="p2/w2",
        state=JobState.COMPLETED,
        started_at=datetime.fromisoformat(start).replace(tzinfo=UTC),
        ended_at=through + timedelta(days=1),
        gpus=2,
    )
    seen.setdefault(cluster, []).append(again)
    rolled = store.usage_records(NOW, seen, HALF_LIVES)
    assert_same_usage(rolled, store.usage_records(NOW, seen), NOW)
    assert {r.project for r in rolled if r.started_at is None} == {"p0", "p1"}
    with store.db.session() as db:
        assert db.execute(text("SELECT count(*) FROM rollups")).scalar() == before


def test_the_rollups_reach_to_the_months_start() -> None:
    assert through_for(NOW) == datetime(2026, 11, 1, tzinfo=UTC)
    assert through_for(datetime(2027, 1, 31, 23, tzinfo=UTC)) == datetime(2027, 1, 1, tzinfo=UTC)
    later = datetime(2027, 2, 1, 0, 30, tzinfo=timezone(timedelta(hours=2)))  # Jan 31 in UTC
    assert through_for(later) == datetime(2027, 1, 1, tzinfo=UTC)


def test_a_new_price_sets_the_rollups_aside(store: Store) -> None:
    """A run recorded without a price takes its type's first price once one is noted:
    a roll-up made before then no longer holds (review)."""
    store.usage_records(NOW, None, HALF_LIVES)
    store.record_runs({}, NOW, complete=[], prices={("east", "a100"): 4.0})
    by_cost = store.usage_records(NOW, None, HALF_LIVES)
    assert_same_usage(by_cost, store.usage_records(NOW), NOW)
    again = store.usage_records(NOW, None, HALF_LIVES)  # made again, with the new book
    assert any(r.started_at is None for r in again)
    assert_same_usage(again, store.usage_records(NOW), NOW)


def test_a_snapshot_kept_by_cp_observe_has_every_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snapshot leaves the process (`cp plan --observed` plans it, with any specs): its
    usage is every run's, not roll-ups that hold for these specs' half-lives only."""
    specs = tmp_path / "q"
    root = Path(__file__).resolve().parents[2]
    shutil.copytree(root / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW.isoformat()))
    url = f"sqlite:///{specs / '.cp' / 'controlplane.db'}"
    with Store(url) as store:
        fill(store, count=40, projects=("nlp", "vision"))
    later = (NOW + timedelta(hours=1)).isoformat()
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", later))  # makes the roll-ups
    with Store(url) as store, store.db.session() as db:
        assert db.execute(text("SELECT count(*) FROM rollups")).scalar()
    usage = ok(cp(capsys, "observe", specs, "--now", later)).json()["usage"]
    assert usage and all("startedAt" in u for u in usage)
