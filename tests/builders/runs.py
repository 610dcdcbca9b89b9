"""A store holding runs of every kind a read must give back as recorded: open, ended,
stopped by an apply, retired, across a month, with and without a price, time limit and
plan; and the runs as a typed ORM read gives them, to compare with."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime, timedelta

from sqlmodel import select

from controlplane.store import Store
from controlplane.store.runs import Run
from controlplane.store.tables import RunRow, aware
from specs.snapshot import JobRun, JobState

T0 = datetime(2026, 10, 31, 22, 30, 15, 250_000, tzinfo=UTC)


def fill(store: Store) -> datetime:
    """Record runs of every kind in ``store``; returns the moment they were last seen."""
    seen = [
        JobRun(job="1", workload="p/a", started_at=T0, gpus=4, gpu_type="a100", plan_id="x1"),
        JobRun(
            job="2",
            workload="p/b",
            state=JobState.COMPLETED,
            started_at=T0 - timedelta(days=40),
            ended_at=T0 + timedelta(hours=5, microseconds=7),  # into November
            gpus=8,
            gpu_type="h100",
            time_limit=86_400,
        ),
        JobRun(job="3", workload="q/c", started_at=T0 + timedelta(minutes=1), gpus=1),
        JobRun(job="4", workload="q/d", started_at=T0, gpus=2, gpu_type="a100"),
    ]
    now = T0 + timedelta(hours=6)
    store.record_runs({"big": seen}, now, prices={("big", "a100"): 2.5})
    store.stopped("big", "3")  # our apply cancelled it: STOPPED until seen ending
    store.retire_runs({"p/a", "p/b", "q/c"})  # q/d left the specs
    return now


def typed(store: Store) -> list[Run]:
    """The runs as the ORM reads them, typed and aware."""
    out = []
    with store.db.session() as db:
        for row in db.exec(select(RunRow)):
            values = {f.name: getattr(row, f.name) for f in fields(Run)}
            for name in ("started_at", "ended_at", "last_seen"):
                if values[name] is not None:
                    values[name] = aware(values[name])
            out.append(Run(**values))
    return sorted(out, key=lambda r: (r.cluster, r.job, r.started_at))
