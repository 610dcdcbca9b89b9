"""Retry backoff for failed jobs: a workload whose job failed waits before it is started again.

Without it a workload whose command fails at once would be submitted on every reconcile,
forever, filling the cluster's queue and the history with identical failures. The wait
doubles with every failure in a row — 1, 2, 4, 8 … minutes, at most an hour — counted from
the failed job's end. The streak is kept by the store (clusters forget ended jobs); it
ends when a job of the workload completes, and a job that ran at least an hour before it
failed starts a new streak, so a long service that fails once a week is not punished for
its history. An edit to the spec ends the wait at once: the failures were the old
version's (a fixed command runs now), and its failures start a new streak.

Failures are FAILED, NODE_FAIL and TIMEOUT (work that ran out of walltime would only run
out again); a CANCELLED job was stopped on purpose and is not one. A node that failed
under a job (or left the simulator's specs) is not the workload's fault: the first such
failure in a row is retried at once, and only a second starts the wait (the workload may
be what takes its nodes down). Pure: the failures come in through the snapshot, ``now``
is an argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from solvers import reasons
from solvers.order import job_id_order
from solvers.problem import Problem
from specs.actions import Reason
from specs.snapshot import Failure, Job, JobState, Snapshot

BASE_SECONDS = 60
CAP_SECONDS = 3600
FAILED_STATES = frozenset({JobState.FAILED, JobState.NODE_FAIL, JobState.TIMEOUT})


def backoff_seconds(count: int) -> int:
    """How long to wait after the ``count``-th failure in a row: 1, 2, 4 … min, capped at 1 h."""
    if count < 1:
        return 0
    return min(CAP_SECONDS, BASE_SECONDS << min(count - 1, 16))


def latest_failure(workload: str, jobs: Iterable[Job], record: Failure | None) -> Failure | None:
    """The workload's newest failure: from the store's ``record``, or from the ended jobs the
    snapshot shows when those are newer (a snapshot file has no store behind it).

    A completed job newer than every failure ends the streak."""
    ended = sorted(
        (
            j
            for j in jobs
            if j.workload == workload and j.ended_at is not None and not j.state.active
        ),
        key=lambda j: (j.ended_at, job_id_order(j.id)),
    )
    newest = ended[-1] if ended else None
    if newest is not None and newest.state == JobState.COMPLETED:
        return None
    if newest is None or newest.state not in FAILED_STATES:
        return record if newest is None or record is None or _not_older(record, newest) else None
    if record is not None and record.job == newest.id:
        return record
    streak = 0
    for job in reversed(ended):
        if job.state not in FAILED_STATES:
            break
        streak += 1
    assert newest.ended_at is not None
    return Failure(
        workload=workload,
        count=max(streak, (record.count + 1) if record else 1),
        job=newest.id,
        ended_at=newest.ended_at,
        exit_code=newest.exit_code,
        spec_digest=newest.spec_digest,
        state=newest.state,
    )


def _not_older(record: Failure, job: Job) -> bool:
    return job.ended_at is None or record.ended_at >= job.ended_at


def wait_seconds(failure: Failure) -> int:
    """The backoff after ``failure``; a node failure counts one less."""
    lost_node = failure.state == JobState.NODE_FAIL
    return backoff_seconds(failure.count - 1 if lost_node else failure.count)


def retry_at(failure: Failure) -> datetime:
    return failure.ended_at + timedelta(seconds=wait_seconds(failure))


def why_waiting(failure: Failure, now: datetime) -> Reason | None:
    """The pending reason while the backoff lasts; None once the workload may run again."""
    at = retry_at(failure)
    if now >= at or not wait_seconds(failure):  # (the failure may be seen after ``now``)
        return None
    return reasons.failed(
        failure.job,
        failure.state,
        failure.exit_code,
        failure.ended_at,
        failure.count,
        at,
        wait_seconds(failure),
    )


def block_failed(
    problem: Problem, observed: Snapshot, now: datetime, digests: Mapping[str, str]
) -> None:
    """Hold back the waiting workloads whose latest job failed until their backoff is over,
    unless the spec was edited since (``digests``: each workload's spec digest now): the
    failure was the old version's, and the fix runs at once."""
    records = {f.workload: f for f in observed.failures}
    jobs: dict[str, list[Job]] = {}
    for c in observed.clusters:
        for j in c.jobs:
            if j.workload is not None:
                jobs.setdefault(j.workload, []).append(j)
    for key, job in problem.jobs.items():
        if job.running or job.blocked is not None or (key not in jobs and key not in records):
            continue  # no failure to wait out (most waiting work never ran)
        failure = latest_failure(key, jobs.get(key, []), records.get(key))
        if failure is None or failure.spec_digest not in (None, digests.get(key)):
            continue
        if (why := why_waiting(failure, now)) is not None:
            job.blocked = why
        else:
            job.retries = failure  # a start now retries it
