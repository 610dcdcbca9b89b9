"""Why work starts or grows: grants, a start cut short, a resumed segment, fan-out."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from solvers.reasons.words import gpus
from specs.actions import Reason, ReasonCode

if TYPE_CHECKING:  # the words need only a queue's name, kind and quota
    from solvers.problem import Queue


# ------------------------------------------------------------------ why work starts or grows


def room_made(
    step: str, victims: Sequence[str], ahead: Sequence[str] = (), moved: Collection[str] = ()
) -> str:
    """What a disruptive step did for a workload it placed: the running work it disturbed
    (``victims``; those in ``moved`` run on elsewhere, not evicted), and the work it went
    ahead of (``ahead``: work this plan would start otherwise, not disturbed, as it was not
    running; it starts elsewhere, smaller, or not at all)."""
    taken = sorted(v for v in victims if v not in moved)
    shifted = sorted(v for v in victims if v in moved)
    parts = [f"{step} of {', '.join(taken)} makes room"] if taken else []
    if shifted:
        verb = "moves" if len(shifted) == 1 else "move"
        parts.append(f"{', '.join(shifted)} {verb} to make room ({step})")
    if ahead:  # nothing of theirs was taken: the step's name alone read as if it was
        parts.append(f"it goes ahead of {', '.join(sorted(ahead))} ({_AHEAD.get(step, step)})")
    return "; ".join(parts)


# why a step puts a workload ahead of waiting work it did not disturb
_AHEAD = {"reclaim": "by fair share", "preemption": "by priority", "consolidation": "packed"}


def granted(
    q: Queue,
    held: float,
    fair: float,
    *,
    grows: tuple[int, int] | None = None,
    room: str | None = None,
    held_np: float | None = None,
    cpu_only: bool = False,
    whole: bool = False,
) -> Reason:
    """Why a workload starts (or grows, ``grows`` = (replicas after, replicas wanted)):
    its project ``q`` holds ``held`` GPUs with it. ``room``: what was disturbed for it.
    ``held_np``: for non-preemptible work, what the project's non-preemptible work holds
    with it. Such work only ever starts within deserved and is never reclaimed or
    preempted, whatever the project's preemptible work holds beyond. ``cpu_only``: the
    workload asks for no GPUs, so the project's quota standing is not its business.
    ``whole``: a gang that may not run with fewer replicas, grown back to all of them (a
    replica was lost): it completes its gang, it is not elastic."""
    grew = ""
    if grows is not None:
        grew = f"grows to {grows[0]} of {grows[1]} replicas"
        if whole:
            grew = f"completes its gang again: {grows[0]} of {grows[1]} replicas (it may not run with fewer)"
    if cpu_only:
        why = f"CPU only: asks for no GPUs, so nothing counts against project {q.name}'s GPU quota"
        why += f"; {room}" if room else ""
        if grows is not None:
            return Reason(
                code=ReasonCode.ELASTIC_EXPAND,
                message=f"{grew}; {why}",
            )
        return Reason(code=ReasonCode.WITHIN_DESERVED, message=why)
    if grows is not None:
        where = f"; {room}" if room else f" on idle GPUs; project {q.name} holds {gpus(held)} GPUs"
        return Reason(
            code=ReasonCode.ELASTIC_EXPAND,
            message=f"{grew}{where}",
        )
    if held_np is not None:
        return Reason(
            code=ReasonCode.WITHIN_DESERVED,
            message=(
                f"non-preemptible: project {q.name}'s non-preemptible work holds "
                f"{gpus(held_np)} of its deserved {gpus(q.deserved)} GPUs with this workload; "
                "it is never reclaimed or preempted" + (f"; {room}" if room else "")
            ),
        )
    if held <= q.deserved:
        return Reason(
            code=ReasonCode.WITHIN_DESERVED,
            message=(
                f"project {q.name} holds {gpus(held)} of its deserved {gpus(q.deserved)} GPUs with "
                "this workload" + (f"; {room}" if room else "")
            ),
        )
    return Reason(
        code=ReasonCode.OVER_QUOTA,
        message=(
            f"project {q.name} holds {gpus(held)} GPUs, {gpus(held - q.deserved)} above its deserved "
            f"{gpus(q.deserved)} (fair share {gpus(fair)}); "
            + (room if room else "runs on idle GPUs and may be reclaimed")
        ),
    )


def started_short(reason: Reason, placed: int, replicas: int, taken_by: Sequence[str]) -> Reason:
    """A workload that starts with fewer replicas than it asked: the plan gives the rest of
    the room to ``taken_by`` (the cycle placed it, then a disruptive step took it back)."""
    rest = f"the rest go to {', '.join(sorted(taken_by))}" if taken_by else "the rest wait"
    return Reason(
        code=reason.code,
        message=f"{reason.message}; starts with {placed} of {replicas} replicas: {rest}",
    )


def resumed(progress: str, reason: Reason) -> Reason:
    """The next checkpoint segment of a workload (``progress``: "segment 3: 16h of 24h done")."""
    return Reason(code=ReasonCode.CHECKPOINT_RESUME, message=f"{progress}; {reason.message}")


def fan_out_candidate(index: int, chosen: int, candidate: str, start: str, cost: str) -> Reason:
    return Reason(
        code=ReasonCode.FAN_OUT,
        message=(
            f"candidate {index} of {chosen}: {candidate}; {start}; {cost}; the first to run wins, "
            "the others are cancelled"
        ),
    )
