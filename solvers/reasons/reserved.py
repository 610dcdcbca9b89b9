"""Reasons that name a node's reservation (a site's announced maintenance): work is kept
off a node whose window it would run into, and work waiting there is placed again."""

from __future__ import annotations

from solvers.reasons.words import stamp
from specs.actions import Reason, ReasonCode
from specs.durations import format_duration
from specs.snapshot import Reservation

_NAMED = 4  # nodes named per window; a rolling maintenance may hold hundreds


def window(nodes: list[str], w: Reservation) -> str:
    """``node a100-1 is reserved for maintenance from ... to ...`` (a few nodes named)."""
    what = "for maintenance" if w.maintenance else f"({w.name})"
    until = f" to {stamp(w.end)}" if w.end is not None else ""
    named = ", ".join(nodes[:_NAMED]) + (
        f" and {len(nodes) - _NAMED} more" if len(nodes) > _NAMED else ""
    )
    subject = f"node {named} is" if len(nodes) == 1 else f"nodes {named} are"
    return f"{subject} reserved {what} from {stamp(w.start)}{until}"


def _limit(lasts: int | None) -> str:
    return f"its {format_duration(lasts)} walltime" if lasts else "a job without a walltime"


def reserved_nodes(
    no_room: Reason, windows: list[tuple[str, Reservation]], lasts: int | None
) -> Reason:
    """A wait for room in pools where nodes with the room are reserved before the job would
    end (``lasts``: its time limit, seconds; None: none): (node, its window), by node."""
    by_window: dict[tuple[object, ...], tuple[Reservation, list[str]]] = {}
    for node, w in windows:
        key = (w.start, w.name, w.end or w.start, w.maintenance)
        by_window.setdefault(key, (w, []))[1].append(node)
    named = "; ".join(window(nodes, w) for _, (w, nodes) in sorted(by_window.items()))
    return Reason(
        code=no_room.code,
        message=f"{no_room.message}; {named}, which {_limit(lasts)} would run into",
    )


def queued_on_reserved_node(job: str, node: str, w: Reservation, lasts: int | None) -> Reason:
    """The cancel of a job waiting in a cluster's queue on a node whose reservation begins
    before it would end: the cluster will not start it there until the window is over."""
    return Reason(
        code=ReasonCode.NO_CAPACITY,
        message=(
            f"job {job} waited in the cluster's queue for {node}, but {window([node], w)}, "
            f"which {_limit(lasts)} would run into: it is cancelled, and the workload planned "
            "again where it fits"
        ),
    )
