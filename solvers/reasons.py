"""The words of the waiting reasons both allocators give, kept in one place.

The greedy (solvers/allocate.py) and the CP-SAT explainer (solvers/cpsat/explain.py)
find the same facts by different routes; a user must read the same sentence either way.
"""

from __future__ import annotations

from solvers.problem import Queue
from specs.actions import Reason, ReasonCode


def gpus(x: float | None) -> str:
    """GPU counts as people write them: ``8``, not ``8.0``."""
    if x is None:
        return "-"
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}"


def over_limit(q: Queue, would_hold: float) -> Reason:
    return Reason(
        code=ReasonCode.OVER_LIMIT,
        message=f"{q.kind} {q.name} would hold {gpus(would_hold)} GPUs, above its limit of "
        f"{gpus(q.limit)}",
    )


def non_preemptible_over_deserved(q: Queue, would_use: float) -> Reason:
    return Reason(
        code=ReasonCode.NON_PREEMPTIBLE_OVER_DESERVED,
        message=f"non-preemptible work of {q.kind} {q.name} would use {gpus(would_use)} GPUs, "
        f"above its deserved {gpus(q.deserved)}; non-preemptible work must fit within "
        "deserved quota",
    )


def shape(count: int, per_replica: int) -> str:
    unit = "GPU" if per_replica == 1 else "GPUs"
    return f"{count} x {per_replica} {unit}" if count > 1 else f"{per_replica} {unit}"


def no_room(count: int, per_replica: int, pools: list[tuple[str, str]], total: int,
            largest: int, *, gang_would_fit_in_total: bool) -> Reason:
    """Why a gang of ``count`` x ``per_replica`` GPUs found no place in ``pools``."""
    names = ", ".join(sorted({f"{c}/{p}" for c, p in pools}))
    if count > 1 and gang_would_fit_in_total:
        return Reason(
            code=ReasonCode.GANG_UNPLACEABLE,
            message=f"gang of {shape(count, per_replica)} must start at once in one pool; "
            f"{total} GPUs are free in {names} but not room for {count} replicas of "
            f"{per_replica} GPUs",
        )
    return Reason(
        code=ReasonCode.NO_CAPACITY,
        message=f"needs {shape(count, per_replica)}; eligible pools {names} have {total} free "
        f"(largest block {largest} on one node)",
    )
