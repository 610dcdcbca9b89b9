"""The order a plan lists its actions in, so that running them in that order works.

A plan reads least disruptive first (submit, resize, move, preempt, cancel: KAI tries
allocate, consolidate, reclaim, preempt in that order), and ``Plan.execution_order`` runs
the evictions first. Among the moves, one may need the place another one leaves: each is
listed after the moves that make its room, checked against the GPUs the observed jobs
hold once the plan's preemptions and shrinks are done. Pure: actions and the snapshot
they were planned against in, the same actions in their order out.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable

from controlplane.plan import DISPLAY_RANK
from specs.actions import Action, Op
from specs.snapshot import Snapshot

NodeRef = tuple[str, str]  # (cluster, node)


def sort_actions(actions: Iterable[Action], observed: Snapshot) -> list[Action]:
    """``actions`` in reading order, the moves in an order in which each finds room."""
    actions = list(actions)
    moves = move_sequence(actions, observed)
    return sorted(
        actions,
        key=lambda a: (
            DISPLAY_RANK[a.op],
            moves.get(a.workload, 0),
            a.workload,
            a.cluster,
            a.job or "",
        ),
    )


def move_sequence(actions: list[Action], observed: Snapshot) -> dict[str, int]:
    """Position of each moved workload: after the preemptions and shrinks, one move at a
    time, each when it fits. (A cycle keeps the order the moves were given in; the
    reconciler avoids the one its steps made, two victims on each other's old nodes:
    solvers/kai/swap.py.)"""
    # only the nodes moves go to are ever checked for room, and only the jobs the actions
    # name are looked up: a plan of thousands of running jobs needs no ledger of them all
    moved = [a for a in actions if a.op == Op.MOVE]
    if not moved:
        return {}
    targets = {(a.cluster, r.node) for a in moved for r in a.replicas or [] if r.node is not None}
    named = {(a.cluster, a.job) for a in actions if a.job}
    capacity: dict[NodeRef, int] = {}
    used: Counter[NodeRef] = Counter()
    held: dict[tuple[str, str], Counter[NodeRef]] = {}  # (cluster, job) -> GPUs per node
    for c in observed.clusters:
        for n in c.nodes:
            if (c.name, n.name) in targets:
                capacity[c.name, n.name] = n.gpus
        for j in c.jobs:
            if not j.state.holds_gpus:
                continue
            for r in j.replicas:
                if r.node is not None and (c.name, r.node) in targets:
                    used[c.name, r.node] += r.gpus
            if (c.name, j.id) in named:
                gpus: Counter[NodeRef] = Counter()
                for r in j.replicas:
                    if r.node is not None:
                        gpus[c.name, r.node] += r.gpus
                held[c.name, j.id] = gpus
    moves: list[tuple[str, Counter[NodeRef], Counter[NodeRef]]] = []
    for a in actions:
        before = held.get((a.cluster, a.job or ""))
        if before is None:
            continue
        after: Counter[NodeRef] = Counter()
        for r in a.replicas or []:
            if r.node is not None:
                after[a.cluster, r.node] += r.gpus
        if a.op == Op.MOVE:
            moves.append((a.workload, before, after))
        elif a.op == Op.PREEMPT or (a.op == Op.RESIZE and after <= before):
            used.subtract(before - after)

    def blocked(after: Counter[NodeRef], before: Counter[NodeRef]) -> list[NodeRef]:
        """The nodes without room for what the move adds there."""
        return [
            ref
            for ref in after
            if after[ref] > before[ref]
            and used[ref] + after[ref] - before[ref] > capacity.get(ref, 0)
        ]

    # Each time, the first move (in the given order) that fits. A move that did not fit can
    # only fit once a node it waits for is freed, so it waits there instead of being
    # checked again after every move.
    order: dict[str, int] = {}
    ready = list(range(len(moves)))  # a min-heap of indices worth checking
    waiting: dict[NodeRef, list[int]] = {}
    left = set(ready)
    while left:
        if ready:
            i = heapq.heappop(ready)
            if i not in left:
                continue
            key, before, after = moves[i]
            refs = blocked(after, before)
            if refs:
                for ref in refs:
                    waiting.setdefault(ref, []).append(i)
                continue
        else:  # a cycle: keep the given order
            i = min(left)
            key, before, after = moves[i]
        left.discard(i)
        used.update(after)
        used.subtract(before)
        order[key] = len(order)
        for ref in before:
            if before[ref] > after[ref]:
                for k in waiting.pop(ref, []):
                    heapq.heappush(ready, k)
    return order
