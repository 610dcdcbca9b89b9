"""The node table of a problem: every node of the snapshot with its pool, capacity, the
GPUs held on it and its next reservation; and times on one UTC clock."""

from __future__ import annotations

from datetime import UTC, datetime

from solvers.problem.records import NodeInfo, PoolInfo, PoolKey, node_key
from specs.snapshot import JobState, Snapshot


def node_table(
    observed: Snapshot, pools: dict[PoolKey, PoolInfo], now: datetime
) -> dict[str, NodeInfo]:
    nodes: dict[str, NodeInfo] = {}
    for c in observed.clusters:
        for n in c.nodes:
            pool = (c.name, n.pool) if n.pool and (c.name, n.pool) in pools else None
            window = next((w for w in n.reservations if not w.over(now)), None)
            closes_in = (utc(window.start) - now).total_seconds() if window else None
            nodes[node_key(c.name, n.name)] = NodeInfo(
                name=n.name,
                cluster=c.name,
                pool=pool,
                capacity=n.gpus,
                used=0,
                # a reservation under way: the node takes no new work, as a drained one
                schedulable=n.schedulable and (closes_in is None or closes_in > 0),
                window=window,
                closes_in=closes_in,
            )
        for j in c.jobs:
            if not j.state.holds_gpus:
                continue
            for r in j.replicas:
                if r.node and (node := nodes.get(node_key(c.name, r.node))) is not None:
                    node.used += r.gpus
                    if j.state is JobState.COMPLETING:
                        node.leaving += r.gpus
        for n in c.nodes:
            if n.full:  # no new job starts there: none of its free GPUs is free for one
                node = nodes[node_key(c.name, n.name)]
                node.used = max(node.used, node.capacity)
    return nodes


def utc(moment: datetime) -> datetime:
    """The same moment on the one shared UTC clock. Times read from a snapshot each carry
    their own time zone object, and two aware datetimes with different ones compare
    through Python-level offset calls: sorting jobs by age was ~14x slower."""
    return moment if moment.tzinfo is UTC or moment.tzinfo is None else moment.astimezone(UTC)
