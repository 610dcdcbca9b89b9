"""Checkpoint segments: work longer than one job may run, done as a chain of jobs.

A workload with ``checkpoint.total`` and a ``walltime`` runs in segments of at most
``walltime``. Each segment's job gets the checkpoint signal ``grace`` before its end,
saves and exits, and counts as done (the Slurm job script turns that stop into exit 0).
The control plane adds up the run time of the finished segments and submits the next
one until ``total`` is reached; the last segment asks only for what is left.

A segment that ends well before its checkpoint time means the command finished the work
by itself (it found nothing left to do): the workload is complete even if the run time
adds up to less than ``total``. Without that rule a command that finishes early would be
started again on every reconcile, each run adding a few seconds.

Run time counts only segments that finished (COMPLETED); a failed, cancelled or
requeued run is not counted, since its progress since the last checkpoint is lost. The
candidates one plan submitted for a fan-out workload are one round: when several ran to
completion before a plan saw one run (and cancelled the others), they ran the same
segment, and only the round's winner counts. The numbers come in as
:class:`~specs.snapshot.Progress` (kept by the store, which remembers jobs the cluster
has forgotten) or, for a snapshot file without them, from the ended jobs it shows; both
are added up by :func:`progress_of`. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from solvers.order import job_id_order, round_winner
from specs.durations import format_duration
from specs.models import WorkloadSpec
from specs.snapshot import Job, JobState, Progress


@dataclass(frozen=True)
class Segments:
    """Where a segmented workload stands: run time so far and what the next segment asks."""

    total: int  # seconds of run time the work needs
    walltime: int  # the longest segment
    grace: int  # checkpoint signal this long before a segment's end
    elapsed: int = 0  # run time of the finished segments
    done: int = 0  # finished segments
    finished: bool = False  # the command finished the work in its last segment

    @property
    def complete(self) -> bool:
        return self.finished or self.elapsed >= self.total

    @property
    def number(self) -> int:
        """The next segment's number, 1-based."""
        return self.done + 1

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.elapsed)

    def walltime_for(self, limit: int | None = None) -> int:
        """The next segment's time limit: what is left plus the grace, at most ``walltime``
        (and ``limit``, a pool's maxWalltime)."""
        cap = self.walltime if limit is None else min(self.walltime, limit)
        return min(cap, self.remaining + self.grace)

    def describe(self) -> str:
        return f"segment {self.number}: {hours(self.elapsed)} of {hours(self.total)} done"


def hours(seconds: int) -> str:
    """Run time in hours, minutes and seconds, never days: ``16h of 24h``, not ``of 1d``."""
    h, rest = divmod(seconds, 3600)
    return (f"{h}h" if h else "") + (format_duration(rest) if rest or not h else "")


def segmented(spec: WorkloadSpec) -> bool:
    """The workload runs in segments: it checkpoints, has a total, and segments have run time."""
    ck = spec.checkpoint
    return (
        ck is not None
        and ck.total is not None
        and spec.walltime is not None
        and spec.walltime > ck.grace
    )


def segments_of(spec: WorkloadSpec, progress: Progress | None) -> Segments | None:
    """Where ``spec`` stands given its progress; None for a workload that is not segmented."""
    if not segmented(spec):
        return None
    ck = spec.checkpoint
    assert ck is not None and ck.total is not None and spec.walltime is not None
    base = Segments(total=ck.total, walltime=spec.walltime, grace=ck.grace)
    if progress is None or progress.segments == 0:
        return base
    finished = progress.last_seconds is not None and ended_early(
        base, progress.elapsed_seconds, progress.last_seconds, progress.last_limit_seconds
    )
    return Segments(
        total=base.total,
        walltime=base.walltime,
        grace=base.grace,
        elapsed=progress.elapsed_seconds,
        done=progress.segments,
        finished=finished,
    )


def ended_early(base: Segments, elapsed: int, last: int, limit: int | None) -> bool:
    """The newest segment (``last`` seconds, ``elapsed`` including it) stopped well before
    its checkpoint time, so the command ended on its own.

    Its checkpoint time was its time limit minus the grace, and the limit was the smaller
    of ``walltime``, what was left before it plus the grace, and the limit the cluster
    reports (a backfilled job may get less than it asked). Slack: a tenth of the run, at
    least 2 s (clocks tick in seconds) and at most a minute (the signal's own jitter).
    """
    before = max(0, elapsed - last)
    run = min(base.walltime, base.total - before + base.grace)
    if limit is not None:
        run = min(run, limit)
    run -= base.grace
    slack = max(2, min(60, run // 10))
    return run > 0 and last + slack < run


@dataclass(frozen=True)
class SegmentRun:
    """A completed run of a segmented workload's job, as its progress counts it."""

    cluster: str
    job: str
    started_at: datetime
    ended_at: datetime
    seconds: int  # its run time (a job resized in place: all its stretches)
    limit: int | None  # its time limit, as the cluster reported it
    plan_id: str | None = None  # the plan that submitted it: its round, for a candidate
    cost: float = 0.0  # an hour of it, its GPUs at their price: a round's tie-break


def progress_of(workload: str, runs: Iterable[SegmentRun]) -> Progress | None:
    """Progress from a workload's completed runs. Each is a segment, except that of the
    runs of one plan's jobs (fan-out candidates: a plan submits a workload one job
    otherwise) only the round's winner counts (:func:`~solvers.order.round_winner`): the
    others ran the same segment again."""
    counted: list[SegmentRun] = []
    rounds: dict[str, list[SegmentRun]] = {}
    for run in runs:
        if run.plan_id is None:
            counted.append(run)
        else:
            rounds.setdefault(run.plan_id, []).append(run)
    counted += (
        round_winner(r, lambda run: (run.started_at, run.cost, run.job)) for r in rounds.values()
    )
    if not counted:
        return None
    counted.sort(key=lambda run: (run.ended_at, run.cluster, job_id_order(run.job)))
    return Progress(
        workload=workload,
        elapsed_seconds=sum(run.seconds for run in counted),
        segments=len(counted),
        last_seconds=counted[-1].seconds,
        last_limit_seconds=counted[-1].limit,
    )


def progress_from_jobs(
    workload: str,
    jobs: Iterable[tuple[str, Job]],
    cost: Callable[[str, Job], float] | None = None,
) -> Progress | None:
    """Progress read off the finished (cluster, job)s a snapshot shows (when it carries
    none itself). ``cost``: what a job costs an hour (unknown: nothing)."""
    return progress_of(
        workload,
        (
            SegmentRun(
                cluster=c,
                job=j.id,
                started_at=j.started_at,
                ended_at=j.ended_at,
                seconds=max(0, int((j.ended_at - j.started_at).total_seconds())),
                limit=j.walltime,
                plan_id=j.plan_id,
                cost=cost(c, j) if cost is not None else 0.0,
            )
            for c, j in jobs
            if j.workload == workload
            and j.state == JobState.COMPLETED
            and j.started_at is not None
            and j.ended_at is not None
        ),
    )
