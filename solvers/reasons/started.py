"""Why work starts or grows: grants, a start cut short, a resumed segment, fan-out."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
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

# the clauses of room_made that name victims (workload names have no spaces or commas)
_STEP = r"(?P<step>reclaim|preemption|consolidation)"
_NAMES = r"(?P<names>[\w./-]+(?:, [\w./-]+)*)"
_TAKEN = re.compile(rf"{_STEP} of {_NAMES} makes room")
_MOVED = re.compile(rf"{_NAMES} moves? to make room \({_STEP}\)")


def room_as_ended(
    message: str, fate: Callable[[str], str | None], code: ReasonCode | None = None
) -> str:
    """``message`` with its :func:`room_made` clauses made true of what the whole plan
    does to each victim (``fate``: "moved", "taken", "stays" where nothing is done to it,
    or None: as told). A later round of a plan may evict a victim that
    moved for this workload, place one it evicted again elsewhere, or put it back where it
    ran: the round's words said "X moves to make room" of a job the plan preempts. Where
    no clause is left, the start (its reason's ``code``) runs on idle GPUs and says so:
    over-quota work as :func:`granted` does, an elastic grow "on idle GPUs" (without the
    project's holding, which the message does not carry)."""
    parts: list[str] = []
    steps: dict[str, tuple[int, list[str], set[str]]] = {}  # where, victims, moved
    for part in message.split("; "):
        found = _TAKEN.fullmatch(part) or _MOVED.fullmatch(part)
        if found is None:
            parts.append(part)
            continue
        if found["step"] not in steps:
            steps[found["step"]] = (len(parts), [], set())
            parts.append("")
        _, victims, moved = steps[found["step"]]
        names = found["names"].split(", ")
        victims += names
        if found.re is _MOVED:
            moved.update(names)
    for step, (at, victims, moved) in steps.items():
        told = {v: "moved" if v in moved else "taken" for v in victims}
        now = {v: fate(v) or told[v] for v in victims}
        parts[at] = room_made(
            step,
            [v for v in victims if now[v] != "stays"],
            (),
            {v for v in victims if now[v] == "moved"},
        )
    kept = [p for p in parts if p]
    if steps and not any(parts[at] for at, _, _ in steps.values()):
        if code == ReasonCode.OVER_QUOTA:
            kept.append(_IDLE)
        elif code == ReasonCode.ELASTIC_EXPAND and kept and kept[0].startswith("grows to "):
            kept[0] += " on idle GPUs"
    return "; ".join(kept)


_IDLE = "runs on idle GPUs and may be reclaimed"


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
            f"{gpus(q.deserved)} (fair share {gpus(fair)}); " + (room if room else _IDLE)
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
