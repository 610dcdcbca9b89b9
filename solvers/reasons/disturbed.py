"""Why running work is disturbed: moved, reclaimed, brought down to a limit,
outranked, pruned, a duplicate or a fan-out loser."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from solvers.reasons.words import gpus, stamp
from specs.actions import Reason, ReasonCode

if TYPE_CHECKING:  # the words need only a queue's name, kind and quota
    from solvers.problem import Queue


# ------------------------------------------------------------------ why running work is disturbed


def moved(
    before: str, after: str, beneficiary: str, step: str, kept: tuple[int, int] | None = None
) -> Reason:
    """Moved to make room; ``kept``: (replicas after, before) when the move left some."""
    fewer = f" with {kept[0]} of its {kept[1]} replicas" if kept and kept[0] < kept[1] else ""
    return Reason(
        code=ReasonCode.CONSOLIDATE,
        message=f"moved from {before} to {after}{fewer} so that {beneficiary} fits ({step})",
    )


def gave_back(nodes: str, beneficiary: str, step: str) -> Reason:
    """An elastic victim that keeps the rest of its replicas where they ran."""
    return Reason(
        code=ReasonCode.ELASTIC_SHRINK,
        message=(
            f"gives back its replicas on {nodes} so that {beneficiary} fits ({step}); the "
            "rest stays where it ran"
        ),
    )


def reclaimed(
    mine: Queue,
    mine_held: float,
    mine_share: float,
    mine_within_deserved: bool,
    theirs: Queue,
    theirs_held: float,
    theirs_share: float,
    beneficiary: str,
    *,
    ran: bool = True,
) -> Reason:
    """Reclaim: ``mine`` (the beneficiary's side) is below its deserved (or fair) share;
    ``theirs`` holds more than its allocatable share (``theirs_share``) or deserved.
    ``ran``: whether the victim ran before the plan; work the plan would have started
    instead is not reclaimed from anyone: the beneficiary goes first, and ``theirs``
    would hold that much with it."""
    if mine_within_deserved:
        gains = (
            f"{mine.kind} {mine.name} is below its deserved {gpus(mine.deserved)} "
            f"(holds {gpus(mine_held)})"
        )
    else:
        gains = (
            f"{mine.kind} {mine.name} is below its fair share {gpus(mine_share)} "
            f"(holds {gpus(mine_held)})"
        )
    holds = f"holds {gpus(theirs_held)}" if ran else f"would hold {gpus(theirs_held)} with it"
    if theirs_held > theirs_share:
        over = f"{gpus(theirs_held - theirs_share)} over its fair share {gpus(theirs_share)}"
    else:
        over = f"{gpus(theirs_held - theirs.deserved)} over its deserved {gpus(theirs.deserved)}"
    loses = f"{theirs.kind} {theirs.name} {holds}, {over}"
    outcome = f"reclaimed for {beneficiary}" if ran else f"{beneficiary} goes first"
    return Reason(code=ReasonCode.RECLAIM, message=f"{gains}; {loses}; {outcome}")


def reclaimed_type(
    mine: Queue, theirs: Queue, gpu_type: str, held: float, beneficiary: str
) -> Reason:
    """Reclaim of one GPU type under per-type quotas (whatever the sums say)."""
    own = (
        f"its {gpu_type} deserved {gpus(mine.on(gpu_type).deserved)}"
        if mine.typed is not None
        else f"its deserved {gpus(mine.deserved)}"
    )
    return Reason(
        code=ReasonCode.RECLAIM,
        message=(
            f"{mine.kind} {mine.name} stays within {own} with this job; {theirs.kind} "
            f"{theirs.name} holds {gpus(held)} {gpu_type} GPUs, "
            f"{gpus(held - theirs.on(gpu_type).deserved)} over its {gpu_type} deserved "
            f"{gpus(theirs.on(gpu_type).deserved)}; reclaimed for {beneficiary}"
        ),
    )


def down_to_limit(
    q: Queue,
    held: float,
    victim: str,
    left: float | None = None,
    kept: Sequence[tuple[str, datetime]] = (),
    limit: float | None = None,
    gpu_type: str | None = None,
    unseen: float = 0.0,
) -> Reason:
    """A queue above a limit that was lowered gives back its preemptible work; ``left``:
    what it holds after, above the limit while minRuntime ``kept`` work (with when its
    protection ends). ``limit`` and ``gpu_type``: a per-type limit (default: the queue's).
    ``unseen``: what it holds besides, held for clusters that did not answer (not in
    ``held``: nothing is taken back for it)."""
    head = f"{q.kind} {q.name} holds {_above(q, held, limit, gpu_type)}: "
    if unseen:
        head = (
            f"{q.kind} {q.name} holds {gpus(held)} GPUs on the clusters that answered, above "
            f"its limit of {gpus(limit if limit is not None else q.limit)} ({gpus(unseen)} more "
            "held for clusters that did not answer keep new work out, but take nothing back): "
        )
    if not kept or left is None:
        return Reason(
            code=ReasonCode.RECLAIM,
            message=f"{head}taken back down to it, lowest priority first ({victim})",
        )
    names = ", ".join(k for k, _ in kept)
    until = stamp(min(t for _, t in kept))
    return Reason(
        code=ReasonCode.RECLAIM,
        message=(
            f"{head}taken back to {gpus(left)}, lowest priority first ({victim}); it keeps "
            f"{names} within minRuntime (until {until} at the earliest)"
        ),
    )


def above_limit(
    q: Queue,
    held: float,
    kept: Sequence[tuple[str, datetime]],
    fixed: float,
    limit: float | None = None,
    gpu_type: str | None = None,
    unseen: float = 0.0,
    refused: Sequence[tuple[str, str, datetime]] = (),
) -> str:
    """Why a queue holds more than its limit (``limit`` on ``gpu_type``: a per-type one)
    after the plan: work inside minRuntime (``kept``, with when each protection ends),
    non-preemptible work (``fixed`` GPUs), work held for clusters that did not answer
    (``unseen`` GPUs) and jobs the cluster refused to evict lately (``refused``: workload,
    job id, when the eviction backoff ends)."""
    parts = []
    if unseen:
        parts.append(
            f"{gpus(unseen)} of them are held for work that may run on clusters that did not "
            "answer: they keep new work out, but no running work is taken back for them"
        )
    if kept:
        names = ", ".join(k for k, _ in kept)
        until = stamp(min(t for _, t in kept))
        parts.append(
            f"minRuntime keeps {names} (until {until} at the earliest), and a plan after "
            "that takes them back"
        )
    if refused:
        jobs = [f"{w} (job {j})" for w, j, _ in refused]
        named = ", ".join(jobs[:-1]) + f" and {jobs[-1]}" if len(jobs) > 1 else jobs[0]
        parts.append(
            f"the cluster refused to evict {named} lately: tried again after "
            f"{stamp(min(t for _, _, t in refused))} at the earliest"
        )
    if fixed:
        parts.append(
            f"its non-preemptible work ({gpus(fixed)} GPU{'' if fixed == 1 else 's'}) is never "
            "taken back, and stays "
            "until it ends"
        )
    why = "; ".join(parts) or "nothing it runs may be taken back now"
    return f"{q.kind} {q.name} holds {_above(q, held, limit, gpu_type)}: {why}"


def _above(q: Queue, held: float, limit: float | None, gpu_type: str | None) -> str:
    if gpu_type is None:
        return (
            f"{gpus(held)} GPUs, above its limit of {gpus(limit if limit is not None else q.limit)}"
        )
    return f"{gpus(held)} {gpu_type} GPUs, above its {gpu_type} limit of {gpus(limit)}"


def then_for(first: Reason, beneficiaries: Sequence[str]) -> Reason:
    """A victim taken from again after ``first`` (what it was told then, with the figures
    before anything was taken), for ``beneficiaries`` in turn."""
    names = ", ".join(beneficiaries)
    return first.model_copy(update={"message": f"{first.message}, then for {names}"})


def place_taken(reason: Reason, beneficiary: str, taker: str | None) -> Reason:
    """An eviction for ``beneficiary``, whose place a later step gave to ``taker`` (or
    took back from it, for no one: ``None``); the beneficiary waits."""
    then = (
        f"{taker} then took {beneficiary}'s place"
        if taker is not None
        else f"{beneficiary} then lost that place again"
    )
    return reason.model_copy(
        update={"message": f"{reason.message}; {then}, and {beneficiary} waits"}
    )


def outranked(beneficiary: str, priority: int, victim_priority: int, project: str) -> Reason:
    return Reason(
        code=ReasonCode.PRIORITY,
        message=(
            f"{beneficiary} (priority {priority}) outranks it (priority {victim_priority}) in "
            f"project {project}"
        ),
    )


def pruned(workload: str, namesake: str | None = None, *, moved: bool = False) -> Reason:
    """``namesake``: a workload of the specs with the same name in a project that is not
    this one's: its project may have been renamed without saying so, or (``moved``: this
    one's project is still in the specs) the workload moved to that project."""
    message = f"workload {workload} is no longer in the specs"
    if namesake is not None:
        old, new = workload.partition("/")[0], namesake.partition("/")[0]
        message += (
            f"; {namesake} has its name: moved to project {new}? a workload's project is "
            f"part of its name, so it starts there as a new job (to keep this one running, "
            f"move it back)"
            if moved
            else f"; {namesake} has its name: if project {old} was renamed {new}, list {old} "
            f"in {new}'s spec.renamedFrom, and its jobs and usage carry over"
        )
    return Reason(code=ReasonCode.PRUNE, message=message)


def fan_out_loser(
    workload: str,
    winner_job: str | None,
    cluster: str | None,
    candidate: str,
    *,
    completed: bool = False,
) -> Reason:
    """``completed``: the winner ran to completion before a plan saw it run; no
    ``winner_job``: it ran on ``cluster`` when last seen, and that cluster does not answer."""
    where = f" on {cluster}" if cluster else ""  # job ids repeat across clusters
    did = "ran to completion" if completed else "runs"
    won = (
        f"job {winner_job}{where} of {workload} {did}"
        if winner_job is not None
        else f"{workload} ran on {cluster} when last seen (the cluster does not answer now)"
    )
    return Reason(
        code=ReasonCode.FAN_OUT_LOSER,
        message=f"fan-out: {won}; candidate {candidate} is no longer needed",
    )


def member_failed(job: str, why: str | None) -> Reason:
    """A gang a replica of which failed while the others run on: they cannot go on."""
    return Reason(
        code=ReasonCode.FAILED,
        message=(
            f"job {job}: {why or 'a replica failed'}; the gang cannot go on without it: the "
            "rest is stopped, and the workload planned again, whole"
        ),
    )


def duplicate(workload: str, kept: str | None, cluster: str | None = None) -> Reason:
    """A second job of a workload that is not fan-out: left by an apply that stopped
    between a replacement's submit and its cancel (or started again elsewhere while its
    cluster was out of the specs)."""
    where = f" on {cluster}" if cluster else ""  # job ids repeat across clusters
    other = f"job {kept}{where} of {workload}" if kept else f"another job of {workload}"
    return Reason(
        code=ReasonCode.FAN_OUT_LOSER,
        message=f"{other} already holds its place; one job per workload",
    )
