"""The unattended loop's guarantees on a real PostgreSQL shared by several reconcilers:
applies started together never double-submit, first use by several processes at once
works, and the history chain verifies and names an edited record."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from controlplane.store import Store
from tests.builders.cli import cp, together
from tests.controlplane.test_concurrency import PAIRS, active_jobs, judge_pair

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.postgres


def quickstart(root: Path) -> Path:
    shutil.copytree(ROOT / "examples" / "quickstart", root, ignore=shutil.ignore_patterns(".cp"))
    return root


def test_a_new_store_needs_init_and_two_inits_at_once_both_succeed(
    fresh_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    specs = quickstart(tmp_path / "q")
    refused = cp(capsys, "plan", specs, "--db", fresh_db)
    assert refused.code == 1 and "cp store init" in refused.err
    inits = together(*[["store", "init", specs, "--db", fresh_db] for _ in range(3)])
    assert [r.code for r in inits] == [0, 0, 0], [r.err for r in inits]
    plans = together(*[["plan", specs, "--db", fresh_db, "--json"] for _ in range(2)])
    assert [r.code for r in plans] == [0, 0], [r.err for r in plans]


def test_applies_started_together_never_double_submit(fresh_db: str, tmp_path: Path) -> None:
    Store(fresh_db, init=True)
    outcomes: Counter[str] = Counter()
    engine = create_engine(fresh_db)
    for i in range(PAIRS):
        # a new simulated cluster each time: the store's memory of the last one (its jobs
        # as placeholders, its queue) would describe another cluster of the same name
        with engine.begin() as conn:
            conn.execute(text("TRUNCATE placeholders, queue, completions, runs, failures, leases"))
            conn.execute(text("DELETE FROM meta WHERE key LIKE 'accounting:%'"))
        specs = quickstart(tmp_path / f"q{i}")
        results = together(
            *[["apply", specs, "--auto-approve", "--db", fresh_db] for _ in range(2)]
        )
        judge_pair(results)
        outcomes["held" if any(r.code == 1 for r in results) else "idle"] += 1
        jobs = active_jobs(specs)
        assert jobs and max(jobs.values()) == 1, jobs
    assert sum(outcomes.values()) == PAIRS


def test_history_chain_on_postgres(
    fresh_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Store(fresh_db, init=True)
    specs = quickstart(tmp_path / "q")
    assert cp(capsys, "apply", specs, "--auto-approve", "--db", fresh_db).code == 0
    ok = cp(capsys, "history", specs, "--verify", "--json", "--db", fresh_db)
    assert ok.code == 0 and ok.json()["ok"] is True and ok.json()["records"] > 10
    with create_engine(fresh_db).begin() as conn:
        conn.execute(text("UPDATE events SET message = 'edited' WHERE id = 4"))
    broken = cp(capsys, "history", specs, "--verify", "--json", "--db", fresh_db)
    assert broken.code == 1 and "event 4 " in broken.json()["problem"]
