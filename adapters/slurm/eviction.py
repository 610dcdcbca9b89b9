"""Preempting a checkpointable job on Slurm with its own checkpoint signal and grace.

A checkpointable job was submitted with ``--signal=B:USR1@grace``: Slurm sends the
workload its checkpoint signal ``grace`` seconds before the job's time limit. To preempt
it, the adapter brings the time limit in instead of killing the job: one ``scontrol
update`` sets the limit to what the job has run plus its grace (and a margin for the
controller's periodic check, which fires the signal up to a minute early), marks the tag
``evicted=<plan>`` and makes the job not requeueable (a workload that requeues its own
job on the signal, as PyTorch Lightning does, would bring it back pending). Slurm then
sends the signal, the workload saves, and the job ends by the new limit at the latest.
``scontrol requeue`` instead sends SIGTERM and, after ``KillWait``, SIGKILL: not the
signal the workload listens for, nor its grace.

Until it ends, such a job is observed as winding down (``COMPLETING``: it still holds
its GPUs, and work queued for its nodes waits for it); once ended, however it ended
(the workload exits after saving, or the limit stops it), as ``PREEMPTED``: the workload
is planned again and resumes from its checkpoint, with no failure and no completion
counted. A checkpoint *segment* runs under ``timeout``, which signals the command by its
own clock (Slurm has no ``--signal`` to send). Preempted or cancelled (its workload
edited or removed), it is tagged the same way and its batch shell is signalled, which
passes the signal on to ``timeout``: the command saves and ``timeout`` ends it once the
grace has passed. Ended, it too is ``PREEMPTED``, not a completed segment: its run is not
counted as progress (a segment cut short would look like one that finished the work).
Only a segment whose script predates the shell passing the signal on is requeued
(``scontrol requeue``: SIGTERM; its shell would die of the signal).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from adapters.base import ActionResult
from adapters.slurm.errors import classify, is_gone
from adapters.slurm.parse import QueueRow
from adapters.slurm.script import forwards_signal, segment_of
from adapters.slurm.shrink import stores_jobs
from adapters.slurm.tags import Tag, format_tag
from adapters.slurm.transport import Completed
from specs.snapshot import JobState

Run = Callable[[list[str]], Completed]
# an update of a job whose database index is not set yet: for ever where nothing sets it
_FROZEN = re.compile(r"DB index is being set", re.IGNORECASE)
# scontrol requeue of a job that is back in the queue already (a race with our read)
_ALREADY_QUEUED = re.compile(r"Job is pending execution", re.IGNORECASE)

# slurmctld checks time limits and signals every 30 s: the grace starts no later than that
CHECK_SECONDS = 30


def observed_state(state: JobState, tag: Tag | None) -> JobState:
    """The state of a job as the control plane sees it: an evicted job that still runs is
    winding down, and one that ended was preempted."""
    if tag is None or tag.evicted is None:
        return state
    if state.holds_gpus:
        return JobState.COMPLETING
    return state if state.active else JobState.PREEMPTED


def grace_of(checkpoint: str) -> int | None:
    """The seconds of a tag's ``SIGNAL@SECONDS``."""
    _, _, seconds = checkpoint.partition("@")
    return int(seconds) if seconds.isdigit() else None


def shortened_limit(
    started: datetime | None, limit: int | None, grace: int, now: datetime
) -> int | None:
    """The time limit, in whole minutes, that ends a job started at ``started`` once its
    ``grace`` has passed from ``now`` (None: its limit comes sooner already)."""
    ran = max(0, int((now - started).total_seconds())) if started else 0
    minutes = -(-(ran + grace + CHECK_SECONDS) // 60)
    if limit is not None and minutes * 60 >= limit:
        return None
    return minutes


def evict(
    run: Run, row: QueueRow, tag: Tag, grace: int, now: datetime, *, segment: bool = False
) -> ActionResult | None:
    """Bring the job's time limit in, so Slurm sends its checkpoint signal now and ends it
    once its ``grace`` has passed, and tag it ``evicted`` (``tag`` says by which plan).
    One ``scontrol update``: a rerun finds the tag and does nothing more.

    A ``segment`` has no ``--signal`` for Slurm to send: its batch shell is signalled
    (``scancel --batch``) and passes the signal on to ``timeout``, which ends the command
    once the grace has passed; the limit is then only a backstop. The tag comes first, so
    that a segment which saves and exits at once is not seen as one completed.

    None: Slurm will never take an update of this job (resized in place on a cluster
    without accounting storage, by an earlier version: adapters/slurm/shrink.py), and the
    caller ends it otherwise."""
    # Requeue=0: a workload that requeues its own job on the signal (PyTorch Lightning)
    # would bring it back pending, with the shortened limit, beside its evictor
    update = [
        "scontrol",
        "update",
        f"JobId={row.job_id}",
        f"Comment={format_tag(tag)}",
        "Requeue=0",
    ]
    minutes = shortened_limit(row.started, row.time_limit, grace, now)
    if minutes is not None:
        update.append(f"TimeLimit={minutes}")
    done = run(update)
    if not done.ok:
        if is_gone(done):
            return ActionResult(
                ok=True, job=row.job_id, message=f"job {row.job_id} had already ended"
            )
        if _FROZEN.search(done.stderr + done.stdout) and stores_jobs(run) is False:
            return None
        raise classify(done)
    limit = f"its time limit brought in to {minutes} min" if minutes else "its own limit is near"
    if segment:
        return _signal_segment(run, row, tag, grace, limit)
    return ActionResult(
        ok=True,
        job=row.job_id,
        message=f"job {row.job_id}: {limit}; Slurm sends its checkpoint signal, then ends it "
        f"once its {grace} s grace has passed",
    )


def wind_down(
    run: Run,
    row: QueueRow,
    tag: Tag,
    state: JobState,
    plan_id: str,
    script: Callable[[], str],
) -> ActionResult | None:
    """A running job's way out with its checkpoint signal and grace (``evict``), or nothing
    more for one on its way out already (cancelled, finished, or evicted by an earlier
    attempt: Slurm 22.05 accepts a requeue of a job completing after a cancel and runs it
    again, which would undo the eviction). A checkpoint segment (``script``, its batch
    script, says) is signalled through its batch shell. None: no grace in its tag, a
    segment whose script predates the shell passing the signal on (that shell would die
    of it), or a job Slurm will never update (:func:`evict`): the caller requeues or
    cancels it."""
    if state is JobState.COMPLETING or tag.evicted is not None:
        return ActionResult(ok=True, job=row.job_id, message=f"job {row.job_id} is already ending")
    grace = grace_of(tag.checkpoint) if tag.checkpoint else None
    if grace is None:
        return None
    text = script()
    segment = segment_of(text) is not None
    if segment and not forwards_signal(text):
        return None
    evicted = replace(tag, evicted=plan_id)
    return evict(run, row, evicted, grace, datetime.now(UTC), segment=segment)


def _signal_segment(run: Run, row: QueueRow, tag: Tag, grace: int, limit: str) -> ActionResult:
    signal, _, _ = (tag.checkpoint or "").partition("@")
    done = run(["scancel", "--batch", f"--signal={signal.removeprefix('SIG')}", row.job_id])
    if not done.ok:
        if is_gone(done):
            return ActionResult(
                ok=True, job=row.job_id, message=f"job {row.job_id} had already ended"
            )
        raise classify(done)
    return ActionResult(
        ok=True,
        job=row.job_id,
        message=f"job {row.job_id}: its checkpoint signal sent to its segment, which ends "
        f"once its {grace} s grace has passed ({limit})",
    )


def requeue(run: Run, row: QueueRow) -> ActionResult:
    """``scontrol requeue``: SIGTERM, SIGKILL after ``KillWait``, back to PENDING."""
    done = run(["scontrol", "requeue", row.job_id])
    if not done.ok:
        if is_gone(done):
            return ActionResult(
                ok=True, job=row.job_id, message=f"job {row.job_id} had already ended"
            )
        if _ALREADY_QUEUED.search(done.stderr + done.stdout):
            return ActionResult(
                ok=True, job=row.job_id, message=f"job {row.job_id} is back in the queue"
            )
        raise classify(done)
    return ActionResult(
        ok=True, job=row.job_id, message=f"requeued job {row.job_id} (checkpointable)"
    )
