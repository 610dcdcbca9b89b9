"""Work that must leave the nodes a simulated cluster's spec removes or shrinks.

A simulated cluster's nodes are its spec. A node the spec removes drains and leaves once
empty: every job there moves off it. A node the spec shrinks below the GPUs its work
holds has its new size at once, the work running on over it: what is not ours stays (it
is not ours to move), then our jobs in the order they started while they fit; the rest
moves off. Work winding down (a cancel or an eviction under way) leaves by itself
within its grace: it neither keeps a place nor moves, and a newer job that fits once it
has ended stays. The simulator adapter reports both kinds of node
(``removedNodes``, ``shrinkingNodes``); the reconciler replaces the jobs named here
elsewhere (solvers/drift.py), and the plan names the nodes.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

from specs.snapshot import ClusterState, Job, JobState

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def must_leave(state: ClusterState) -> dict[str, list[tuple[str, str]]]:
    """Per job id of ``state``, the nodes it must leave, each with why."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    gone = set(state.removed_nodes)
    on: dict[str, list[tuple[Job, int]]] = defaultdict(list)  # node -> (job, GPUs there)
    for job in state.jobs:
        if not job.state.active or job.state is JobState.COMPLETING:
            continue
        here: dict[str, int] = defaultdict(int)
        for r in job.replicas:
            if r.node is not None:
                here[r.node] += r.gpus
        for node, gpus in sorted(here.items()):
            if node in gone and job.workload is not None:
                why = f"its node {node} leaves the cluster (its Cluster spec no longer has it)"
                out[job.id].append((node, why))
            elif node in state.shrinking_nodes:
                on[node].append((job, gpus if job.state.holds_gpus else 0))
    for node, size in sorted(state.shrinking_nodes.items()):
        kept = sum(g for j, g in on[node] if j.workload is None)
        ours = sorted(
            ((j, g) for j, g in on[node] if j.workload is not None),
            key=lambda jg: (jg[0].started_at is None, jg[0].started_at or _EPOCH, jg[0].id),
        )
        for job, gpus in ours:
            if kept + gpus <= size:
                kept += gpus
                continue
            why = (
                f"its node {node} shrinks to {_gpus(size)} (its Cluster spec gives it fewer "
                "than its work holds)"
            )
            out[job.id].append((node, why))
    return dict(out)


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"
