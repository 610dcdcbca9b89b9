"""Completions: a workload that ran to completion is done, after its job is forgotten.

Clusters forget ended jobs (Slurm keeps one for ``MinJobAge``, five minutes by default;
a Kubernetes job may be deleted), so the store remembers each workload's completed job and
observations add it back where the clusters no longer show it: without it a finished
workload would look never run, and be started again; so would one whose cluster has left
the specs since (decommissioned, its workloads free to run elsewhere). A workload gone
from the specs loses its memory, so one removed and added again runs again.

A fan-out workload's candidates race on several clusters, and the one that completed
wins its round (the candidates one plan submitted): the others lost. When the winner is
forgotten while a rival still waits or runs (its cluster did not answer when the winner
ended, so it could not be cancelled), the remembered completion is added back beside the
rival, with the plan that submitted it, so the plan still sees the round won and cancels
the rival instead of letting it run the finished work again.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from specs.snapshot import ClusterState, Job, JobState, Snapshot

EARLIER = " (earlier)"  # after the id of a remembered job whose id now names another

if TYPE_CHECKING:  # the store (sqlalchemy) is imported only where it is opened
    from controlplane.store import Store
    from controlplane.store.tables import CompletionRow


def recall_completions(
    snap: Snapshot,
    store: Store,
    workloads: set[str],
    *,
    record: bool = True,
    earlier: Mapping[str, str] | None = None,
) -> Snapshot:
    """Add the remembered completed jobs the clusters no longer show; with ``record``,
    remember the completed jobs in view first. Those of a cluster the snapshot does not
    have (gone from the specs) come on a cluster of their own, ``gone``. ``earlier``: the
    old name -> the name now of each workload of a renamed project (its jobs carry the old
    one, the store's memory the new one once it has carried it over)."""
    done = {
        (j.workload, c.name): (j.id, j.spec_digest, j.ended_at)
        for c in snap.clusters
        for j in c.jobs
        if j.workload in workloads and j.state == JobState.COMPLETED
    }
    if done and record:
        store.record_completions(done, snap.now)
    shown = {j.workload for c in snap.clusters for j in c.jobs if j.workload}
    shown |= {earlier[w] for w in shown if earlier and w in earlier}
    ids = {(c.name, j.id): j for c in snap.clusters for j in c.jobs}
    remembered = store.completions(workloads, prune=record)
    rounds = _rivals(snap, [r for r in remembered if r.workload in shown], store)
    # when each forgotten one started, from the store's runs: an edit is told from a
    # revert by it (a spec seen before the job started was not edited while it ran)
    began = _starts(store, [r for r in remembered if r.workload not in shown])
    extra: dict[str, list[Job]] = {}
    renamed: dict[tuple[str, str], str] = {}  # (cluster, id) -> its workload's name now
    for row in remembered:
        seen = ids.get((row.cluster, row.job))
        if row.workload not in shown and seen is not None and _same(seen, row, workloads):
            renamed[row.cluster, row.job] = row.workload  # tagged with a name since dropped
            continue
        if row.workload not in shown or (row.cluster, row.job) in rounds:
            plan_id, started = rounds.get(
                (row.cluster, row.job), (None, began.get((row.cluster, row.job)))
            )
            # an id the cluster gave again (numbered afresh after it lost its state, or
            # wrapped at its largest): the live job keeps it, the memory takes another
            again = (row.cluster, row.job) in ids
            extra.setdefault(row.cluster, []).append(
                Job(
                    id=f"{row.job}{EARLIER}" if again else row.job,
                    workload=row.workload,
                    state=JobState.COMPLETED,
                    reason="completed; remembered by the store"
                    + (f" (its id {row.job} now names another job)" if again else ""),
                    spec_digest=row.spec_digest,
                    plan_id=plan_id,
                    started_at=started,
                    # when it ended (when it was first seen ended, if the cluster did not say)
                    ended_at=row.seen_at.replace(tzinfo=row.seen_at.tzinfo or UTC),
                )
            )
    if not extra and not renamed:
        return snap
    clusters = [
        c.model_copy(update={"jobs": [*_named(c, renamed), *extra.get(c.name, [])]})
        for c in snap.clusters
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


def _starts(store: Store, rows: list[CompletionRow]) -> dict[tuple[str, str], datetime]:
    """(cluster, job) -> when each remembered completed job began: its latest run's start,
    of its runs of its workload that began by its end (an id may name other jobs since)."""
    if not rows:
        return {}
    asked = [(r.cluster, r.job, r.workload, _aware(r.seen_at)) for r in rows]
    return {(c, j): start for (c, j, _, _), (_, start, _) in store.last_runs(asked).items()}


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=moment.tzinfo or UTC)


def _same(seen: Job, row: CompletionRow, workloads: set[str]) -> bool:
    """The completed job the cluster shows is the one the store remembers under another name:
    it is tagged with a name the specs no longer know (a project's earlier one, once
    ``renamedFrom`` is dropped) and ran the same spec (where the store noted it)."""
    return (
        seen.state == JobState.COMPLETED
        and seen.workload not in workloads
        and row.spec_digest in (None, seen.spec_digest)
    )


def _named(cluster: ClusterState, renamed: dict[tuple[str, str], str]) -> list[Job]:
    """The cluster's jobs, those the store knows by a newer name under that name."""
    return [
        j.model_copy(update={"workload": renamed[cluster.name, j.id]})
        if (cluster.name, j.id) in renamed
        else j
        for j in cluster.jobs
    ]


def _rivals(
    snap: Snapshot, rows: list[CompletionRow], store: Store
) -> dict[tuple[str, str], tuple[str | None, datetime]]:
    """Of the remembered completions of workloads the clusters still show, those (cluster,
    job) that were fan-out candidates whose round still has one in view, not completed
    (queued or running where it could not be cancelled): the plan that submitted each,
    and when it started. A completion in view itself needs no memory."""
    if not rows:
        return {}
    completed_shown = {
        j.workload for c in snap.clusters for j in c.jobs if j.state == JobState.COMPLETED
    }
    rivals = {
        (j.workload, j.plan_id)
        for c in snap.clusters
        for j in c.jobs
        if j.candidate is not None and j.plan_id is not None and j.state.active
    }
    wanted = [r for r in rows if r.workload not in completed_shown]
    first = store.first_runs((r.cluster, r.job) for r in wanted)
    return {
        (r.cluster, r.job): first[r.cluster, r.job]
        for r in wanted
        if (r.cluster, r.job) in first and (r.workload, first[r.cluster, r.job][0]) in rivals
    }
