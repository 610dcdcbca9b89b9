"""Observation: ask every cluster's adapter, and add what only the store knows.

The snapshot gets the queue entry time of every waiting workload (first seen, from the
store) so that job order is "older first" across runs; the jobs we submitted that the
clusters do not show yet (placeholders.py), so nothing is submitted twice; and the
workloads that ran to completion after the cluster has forgotten their job (Slurm keeps
an ended job for ``MinJobAge``, five minutes by default), so a finished workload is not
started again. Likewise the run time of a segmented workload's finished segments
(``progress``) and each workload's streak of failed jobs (``failures``, for the retry
backoff), both kept by the store from the ended jobs observations see.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from adapters import make_adapter
from adapters.base import Adapter
from controlplane import placeholders
from controlplane.store import Store
from solvers.backoff import CAP_SECONDS, FAILED_STATES
from solvers.segments import segmented
from specs.desired import DesiredState
from specs.snapshot import Job, JobState, QueueEntry, Snapshot


def adapters_for(desired: DesiredState, state_dir: Path, clock: Callable[[], datetime]) -> dict[str, Adapter]:
    return {name: make_adapter(c, state_dir=state_dir, clock=clock)
            for name, c in sorted(desired.clusters.items())}


def observe(desired: DesiredState, adapters: dict[str, Adapter], now: datetime,
            store: Store | None = None, *, record: bool = True) -> Snapshot:
    """The clusters' state as of ``now``. With a store: placeholders judged (dead ones
    dropped, lagging ones injected) and, when ``record``, queue times and usage kept."""
    clusters = [adapters[name].observe() for name in sorted(adapters)]
    snap = Snapshot(now=now, clusters=clusters)
    if store is None:
        return snap
    snap = reap_placeholders(snap, store)
    snap = recall_completions(snap, store, set(desired.workloads))
    if record:
        active = {j.workload for c in snap.clusters for j in c.jobs
                  if j.workload and j.state.active}
        waiting = set(desired.workloads) - active
        since = store.queue_since(waiting, now)
        snap.queue = [QueueEntry(workload=k, since=v) for k, v in sorted(since.items())]
        store.accrue_usage(snap)
        snap.usage = store.usage_records()
        record_endings(snap, store, desired)
    snap.progress = store.progress({k for k, w in desired.workloads.items() if segmented(w.spec)})
    snap.failures = store.failures(set(desired.workloads))
    return snap


def record_endings(snap: Snapshot, store: Store, desired: DesiredState) -> None:
    """Runs of segmented workloads, and the ended jobs that extend or end failure streaks."""
    store.record_runs(snap, {k for k, w in desired.workloads.items() if segmented(w.spec)})
    endings = []
    for c in snap.clusters:
        for j in c.jobs:
            if j.workload is None or j.workload not in desired.workloads:
                continue
            if (j.ended_at is not None and not j.state.active
                    and (j.state in FAILED_STATES or j.state == JobState.COMPLETED)):
                ran = int((j.ended_at - j.started_at).total_seconds()) if j.started_at else 0
                endings.append((j.workload, j.id, j.ended_at, j.exit_code,
                                j.state in FAILED_STATES, ran))
    if endings:
        store.record_endings(endings, fresh_after=CAP_SECONDS)


def reap_placeholders(snap: Snapshot, store: Store) -> Snapshot:
    """Drop the placeholders whose job started or died; inject the lagging ones."""
    verdicts = placeholders.judge(store.placeholders(), snap)
    for v in verdicts:
        if not v.fate.live:
            ph = v.placeholder
            store.drop_placeholder(ph.workload, ph.cluster, job=ph.job)
    return placeholders.inject(snap, verdicts)


def recall_completions(snap: Snapshot, store: Store, workloads: set[str]) -> Snapshot:
    """Record the completed jobs in view; add the remembered ones the clusters no longer show."""
    done = {(j.workload, c.name): j.id for c in snap.clusters for j in c.jobs
            if j.workload in workloads and j.state == JobState.COMPLETED}
    if done:
        store.record_completions(done, snap.now)
    shown = {j.workload for c in snap.clusters for j in c.jobs if j.workload}
    extra: dict[str, list[Job]] = {}
    for row in store.completions(workloads):
        if row.workload not in shown:
            extra.setdefault(row.cluster, []).append(
                Job(id=row.job, workload=row.workload, state=JobState.COMPLETED,
                    reason="completed; remembered by the store"))
    if not extra:
        return snap
    clusters = [c.model_copy(update={"jobs": [*c.jobs, *extra.get(c.name, [])]})
                for c in snap.clusters]
    return snap.model_copy(update={"clusters": clusters})
