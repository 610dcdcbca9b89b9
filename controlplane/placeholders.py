"""Placeholders: jobs we submitted that an observation may not show yet (RelayMD's cycle).

Between ``sbatch`` returning a job id and that job showing up in the next observation
there can be a gap: a busy or failing-over controller, a remote scheduler reached
through a cache (slurmrestd, a federation, a Kubernetes informer). A reconcile that ran
on such a snapshot would see the workload with no job and submit it again. So apply
records every job it creates as a placeholder in the store, and every observation
judges each placeholder against what the clusters report:

=============  ==============================================  ===============================
fate           what the snapshot shows                          what happens
=============  ==============================================  ===============================
``waiting``    the job, pending                                 kept; the workload is submitted
``lagging``    nothing, and the job is younger than the grace   kept; injected as a pending job
``started``    the job holds (or held) GPUs                     dropped: it is a normal job now
``died``       the job ended without ever starting              dropped: plannable again
``vanished``   nothing after the grace, or the id is reused     dropped: plannable again
``unobserved`` no report of its cluster, or it did not answer   kept, nothing injected
=============  ==============================================  ===============================

The grace exists because Slurm forgets ended jobs after ``MinJobAge`` (300 s by default):
a job cancelled while pending may vanish without our ever seeing it end. Two minutes is
far beyond any observation lag and well inside that window.

An injected job is skipped when the workload already has an active job in the snapshot
(say, the old job of a move that is still winding down): injecting it then would make the
reconciler see two jobs and cancel one of them.

Pure: placeholders, a snapshot and the grace in; verdicts and a new snapshot out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Protocol

from specs.snapshot import ClusterState, Job, JobState, Snapshot

DEFAULT_GRACE = timedelta(minutes=2)


class PlaceholderRecord(Protocol):
    """What the store keeps per placeholder (``store.PlaceholderRow`` has these fields)."""

    workload: str
    cluster: str
    job: str
    plan_id: str
    submitted_at: datetime


class Fate(StrEnum):
    WAITING = "waiting"
    LAGGING = "lagging"
    STARTED = "started"
    DIED = "died"
    VANISHED = "vanished"
    UNOBSERVED = "unobserved"

    @property
    def live(self) -> bool:
        """The placeholder still stands for a job that may run: keep it in the store."""
        return self in (Fate.WAITING, Fate.LAGGING, Fate.UNOBSERVED)


@dataclass(frozen=True)
class Verdict:
    placeholder: PlaceholderRecord
    fate: Fate


def judge(
    placeholders: Iterable[PlaceholderRecord],
    snapshot: Snapshot,
    *,
    grace: timedelta = DEFAULT_GRACE,
) -> list[Verdict]:
    """The fate of each placeholder given what ``snapshot`` shows (its ``now`` is the clock)."""
    clusters = {c.name: {j.id: j for j in c.jobs} for c in snapshot.clusters if c.reachable}
    out = []
    for ph in placeholders:
        jobs = clusters.get(ph.cluster)
        fate = Fate.UNOBSERVED if jobs is None else _fate(ph, jobs.get(ph.job), snapshot.now, grace)
        out.append(Verdict(ph, fate))
    return out


def _fate(ph: PlaceholderRecord, job: Job | None, now: datetime, grace: timedelta) -> Fate:
    if job is not None and job.workload != ph.workload:
        return Fate.VANISHED  # the id now names somebody else's job: ours is long gone
    if job is None:
        young = now - _aware(ph.submitted_at) <= grace
        return Fate.LAGGING if young else Fate.VANISHED
    if job.state.holds_gpus or job.started_at is not None:
        return Fate.STARTED
    if job.state.active:
        return Fate.WAITING
    return Fate.DIED


def inject(snapshot: Snapshot, verdicts: Sequence[Verdict]) -> Snapshot:
    """``snapshot`` plus a pending job for every lagging placeholder whose workload has none."""
    busy = {j.workload for c in snapshot.clusters for j in c.jobs if j.workload and j.state.active}
    extra: dict[str, list[Job]] = {}
    for v in verdicts:
        ph = v.placeholder
        if v.fate is not Fate.LAGGING or ph.workload in busy:
            continue
        busy.add(ph.workload)
        extra.setdefault(ph.cluster, []).append(
            Job(
                id=ph.job,
                workload=ph.workload,
                plan_id=ph.plan_id,
                state=JobState.PENDING,
                submitted_at=_aware(ph.submitted_at),
                reason="submitted; not yet visible to observe (placeholder)",
            )
        )
    if not extra:
        return snapshot
    clusters: list[ClusterState] = [
        c.model_copy(update={"jobs": [*c.jobs, *extra[c.name]]}) if c.name in extra else c
        for c in snapshot.clusters
    ]
    return snapshot.model_copy(update={"clusters": clusters})


def _aware(dt: datetime) -> datetime:
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)  # SQLite drops the zone
