"""One actor at a time: reconcilers started together never double-submit, and first use of
a spec repo by two processes at once works (simulator and SQLite; the same races on
PostgreSQL and on the real Slurm are in tests/integration)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

from tests.builders.cli import Result, together

ROOT = Path(__file__).resolve().parents[2]
PAIRS = 20


def quickstart(root: Path) -> Path:
    shutil.copytree(ROOT / "examples" / "quickstart", root, ignore=shutil.ignore_patterns(".cp"))
    return root


def active_jobs(specs: Path) -> Counter[str]:
    """Workload -> active jobs, read from the simulator's state files."""
    counts: Counter[str] = Counter()
    for state in (specs / ".cp" / "simulator").glob("*.json"):
        for job in json.loads(state.read_text())["state"]["jobs"]:
            if job["workload"] and job["state"] in ("PENDING", "RUNNING"):
                counts[job["workload"]] += 1
    return counts


def judge_pair(results: list[Result]) -> None:
    """Exactly one applies; the other found the lease held (and says by whom) or, if it
    came second, nothing left to do."""
    applied = [r for r in results if r.code == 0 and "Apply complete" in r.out]
    assert len(applied) == 1, [(r.code, r.out[-300:], r.err) for r in results]
    other = next(r for r in results if r is not applied[0])
    held = other.code == 1 and "another reconciler is applying (" in other.err
    idle = other.code == 0 and "No changes" in other.out
    assert held or idle, (other.code, other.out[-300:], other.err)


def test_two_applies_started_together_never_submit_twice(tmp_path: Path) -> None:
    outcomes: Counter[str] = Counter()
    for i in range(PAIRS):
        specs = quickstart(tmp_path / f"q{i}")
        results = together(*[["apply", specs, "--auto-approve"] for _ in range(2)])
        judge_pair(results)
        outcomes["held" if any(r.code == 1 for r in results) else "idle"] += 1
        jobs = active_jobs(specs)
        assert jobs and max(jobs.values()) == 1, jobs
    assert sum(outcomes.values()) == PAIRS


def test_two_first_plans_of_a_fresh_repo_both_succeed(tmp_path: Path) -> None:
    for i in range(5):
        specs = quickstart(tmp_path / f"q{i}")
        now = "2026-11-22T10:00:00"
        results = together(*[["plan", specs, "--json", "--now", now] for _ in range(3)])
        assert [r.code for r in results] == [0, 0, 0], [r.err for r in results]
        assert len({r.json()["id"] for r in results}) == 1, "same inputs, same plan"
