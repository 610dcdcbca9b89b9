"""Which nodes are reserved, and when: the windows ``cp get nodes`` and ``cp explain`` show.

A site announces a maintenance as a reservation (Slurm's, read at observe into the
snapshot's ``Node.reservations``). The planner keeps new work off a node whose window it
would run into, and a window under way takes the node out as a drain does
(solvers/placement.py); a waiting workload's reason names windows only where they stood
between it and room it would otherwise have had. A reader looking at nodes, or asking why
a workload waits, sees every window not over yet on the nodes in question: its name,
start and end.

Pure: a snapshot, the specs and a time in, rows out; the command line renders them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from solvers.problem import workload_pools
from solvers.reasons.words import stamp
from specs.desired import DesiredState
from specs.snapshot import Node, Reservation, Snapshot


@dataclass(frozen=True)
class Window:
    """A reservation on a node, as listed (``end`` None: no end known)."""

    name: str
    start: datetime
    end: datetime | None
    maintenance: bool

    def describe(self) -> str:
        """``maint-nov (maintenance) from 2026-11-22T10:30:00Z to 2026-11-22T14:00:00Z``."""
        what = f"{self.name} (maintenance)" if self.maintenance else self.name
        until = f" to {stamp(self.end)}" if self.end is not None else ", no end known"
        return f"{what} from {stamp(self.start)}{until}"


@dataclass(frozen=True)
class ReservedNode:
    """A window not over yet on one node; ``under_way``: it has begun (the node takes no
    new work)."""

    cluster: str
    node: str
    window: Window
    under_way: bool


def upcoming(node: Node, now: datetime) -> list[Window]:
    """The node's windows not over at ``now``, earliest first (those under way among them)."""
    return [_window(w) for w in sorted(node.reservations, key=lambda w: w.start) if not w.over(now)]


def under_way(node: Node, now: datetime) -> bool:
    """Whether a window of the node has begun at ``now`` and is not over."""
    return any(w.start <= now and not w.over(now) for w in node.reservations)


def workload_windows(
    desired: DesiredState, observed: Snapshot, workload: str, now: datetime, placing: bool
) -> list[ReservedNode]:
    """The windows not over at ``now`` on the nodes ``workload``'s active jobs hold or wait
    on and, where the plan may still place it (``placing``: it waits, or its queued job
    may be placed again), on the nodes of every pool it may use; earliest first, then by
    cluster and node."""
    nodes = {
        (c, r.node) for c, j in observed.jobs_of(workload) if j.state.active for r in j.replicas
    }
    pools = set(workload_pools(desired, workload, observed)) if placing else set()
    out = []
    for c in observed.clusters:
        for n in c.nodes:
            if (c.name, n.name) in nodes or (c.name, n.pool) in pools:
                out += [ReservedNode(c.name, n.name, w, w.start <= now) for w in upcoming(n, now)]
    return sorted(out, key=lambda r: (r.window.start, r.window.name, r.cluster, r.node))


def _window(w: Reservation) -> Window:
    return Window(name=w.name, start=w.start, end=w.end, maintenance=w.maintenance)
