"""Completions: a workload that ran to completion is done, after its job is forgotten.

Clusters forget ended jobs (Slurm keeps one for ``MinJobAge``, five minutes by default;
a Kubernetes job may be deleted), so the store remembers each workload's completed job and
observations add it back where the clusters no longer show it: without it a finished
workload would look never run, and be started again; so would one whose cluster has left
the specs since (decommissioned, its workloads free to run elsewhere). A workload gone
from the specs loses its memory, so one removed and added again runs again.
"""

from __future__ import annotations

from datetime import UTC
from typing import TYPE_CHECKING

from specs.snapshot import ClusterState, Job, JobState, Snapshot

if TYPE_CHECKING:  # the store (sqlalchemy) is imported only where it is opened
    from controlplane.store import Store


def recall_completions(
    snap: Snapshot, store: Store, workloads: set[str], *, record: bool = True
) -> Snapshot:
    """Add the remembered completed jobs the clusters no longer show; with ``record``,
    remember the completed jobs in view first. Those of a cluster the snapshot does not
    have (gone from the specs) come on a cluster of their own, ``gone``."""
    done = {
        (j.workload, c.name): (j.id, j.spec_digest, j.ended_at)
        for c in snap.clusters
        for j in c.jobs
        if j.workload in workloads and j.state == JobState.COMPLETED
    }
    if done and record:
        store.record_completions(done, snap.now)
    shown = {j.workload for c in snap.clusters for j in c.jobs if j.workload}
    extra: dict[str, list[Job]] = {}
    for row in store.completions(workloads, prune=record):
        if row.workload not in shown:
            extra.setdefault(row.cluster, []).append(
                Job(
                    id=row.job,
                    workload=row.workload,
                    state=JobState.COMPLETED,
                    reason="completed; remembered by the store",
                    spec_digest=row.spec_digest,
                    # when it ended (when it was first seen ended, if the cluster did not say)
                    ended_at=row.seen_at.replace(tzinfo=row.seen_at.tzinfo or UTC),
                )
            )
    if not extra:
        return snap
    clusters = [
        c.model_copy(update={"jobs": [*c.jobs, *extra.get(c.name, [])]}) for c in snap.clusters
    ]
    # a cluster gone from the specs is not observed (nothing reaches it), but what
    # completed there is done all the same
    observed = {c.name for c in snap.clusters}
    clusters += [
        ClusterState(name=name, jobs=jobs, gone=True)
        for name, jobs in sorted(extra.items())
        if name not in observed
    ]
    return snap.model_copy(update={"clusters": clusters})
