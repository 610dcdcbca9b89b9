"""The store's history under a plan: what reading the runs costs as they accumulate.

Every observation a plan makes reads the runs of our jobs from the store: all of them,
for fair-share decay and monthly budgets (``Store.usage_records``), and those of the
workloads in checkpoint segments, for their progress (``Store.progress``). A read-only
plan (``cp plan``, ``cp get``, ``cp usage``) also merges in what it has just seen, as if
recorded. This fills a SQLite store with ``--days`` of runs (``--runs-per-day``: a busy
300-node cluster ends about 1,600 a day, half of them completions, half preemptions) and
times one of each read, recorded and read-only (with 2,000 runs seen running now, as a
busy cluster shows).

Then the same reads as a plan makes them, given each project's half-life: the runs that
ended before the month before now's are read as their roll-ups (controlplane/store/
rollups.py), which the first recorded read makes ("rolled up").

Run: .venv/bin/python -m benchmarks.history [--days 0,30,60] [--runs-per-day 1600]

Ratios are against the same reads of a store with no history, in the same process.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from controlplane.store import Store
from controlplane.store.tables import RunRow
from specs.snapshot import JobRun, JobState

NOW = datetime(2026, 11, 22, 10, tzinfo=UTC)
PROJECTS = 40


def fill(store: Store, days: int, per_day: int, seed: int = 0) -> None:
    """``days`` of runs ended by ``NOW``, ``per_day`` a day, of 1, 2 or 8 GPUs, 1-30 hours
    each."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for i in range(days * per_day):
        hours = rng.randrange(1, 30)
        start = NOW - timedelta(hours=hours, seconds=rng.randrange(days * 86_400))
        project = f"p{i % PROJECTS:03d}"
        rows.append(
            {
                "cluster": "big",
                "job": str(10_000 + i),
                "started_at": start,
                "workload": f"{project}/w{i % 5_000:05d}",
                "project": project,
                "state": "COMPLETED" if i % 2 else "PREEMPTED",
                "ended_at": start + timedelta(hours=hours),  # by NOW
                "gpus": rng.choice([1, 1, 2, 8]),
                "gpu_type": "a100",
                "price": 2.5,
                "last_seen": NOW,
                "retired": False,
            }
        )
    with store.db.session() as db:
        for at in range(0, len(rows), 20_000):
            db.execute(insert(RunRow), rows[at : at + 20_000])
        db.commit()


def running_now(count: int) -> dict[str, list[JobRun]]:
    """What an observation of a busy cluster reports: ``count`` runs under way."""
    return {
        "big": [
            JobRun(
                job=str(i),
                workload=f"p{i % PROJECTS:03d}/r{i:05d}",
                state=JobState.RUNNING,
                started_at=NOW - timedelta(minutes=1 + i % 600),
                gpus=1,
                gpu_type="a100",
            )
            for i in range(count)
        ]
    }


HALF_LIVES = {f"p{p:03d}": 7 * 86_400 for p in range(PROJECTS)}  # Slurm's default, each


def timed(
    store: Store,
    seen: dict[str, list[JobRun]] | None,
    segmented: set[str],
    half_lives: dict[str, int] | None = None,
) -> float:
    start = time.perf_counter()
    store.usage_records(NOW, seen, half_lives)
    store.progress(segmented, now=NOW, seen=seen)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", default="0,30,60")
    parser.add_argument("--runs-per-day", type=int, default=1_600)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    seen = running_now(2_000)
    segmented = {f"p{p:03d}/w{w:05d}" for p in range(PROJECTS) for w in range(p, 5_000, 400)}
    print(f"segmented workloads: {len(segmented)}; runs seen running: {len(seen['big'])}")
    print(
        "| days | runs | recorded s | x no history | read-only s | x no history "
        "| rolled up: recorded s | read-only s |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    base: tuple[float, float] | None = None
    for days in (int(d) for d in args.days.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(f"sqlite:///{Path(tmp) / 'store.db'}", init=True, create_dir=True)
            fill(store, days, args.runs_per_day)
            recorded = min(timed(store, None, segmented) for _ in range(args.repeat))
            read_only = min(timed(store, seen, segmented) for _ in range(args.repeat))
            store.usage_records(NOW, None, HALF_LIVES)  # the first recorded read rolls up
            rolled = min(timed(store, None, segmented, HALF_LIVES) for _ in range(args.repeat))
            rolled_ro = min(timed(store, seen, segmented, HALF_LIVES) for _ in range(args.repeat))
            store.close()
        base = base or (recorded, read_only)
        print(
            f"| {days} | {days * args.runs_per_day:,} | {recorded:.3f} | {recorded / base[0]:.1f}"
            f" | {read_only:.3f} | {read_only / base[1]:.1f} | {rolled:.3f} | {rolled_ro:.3f} |"
        )


if __name__ == "__main__":
    main()
