"""The order moves run in: each after the moves that make its room (controlplane/sequence.py).

The sequence used to rescan every remaining move after each one (quadratic in the moves);
it now lets a move that does not fit wait on the nodes it needs. The rule is unchanged:
each time, the first move in the given order that fits, and the given order in a cycle.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from controlplane.sequence import move_sequence
from specs.actions import Action, Op, Reason, ReasonCode
from specs.snapshot import ClusterState, Job, Node, Replica, Snapshot
from tests.builders import NOW

WHY = Reason(code=ReasonCode.CONSOLIDATE, message="room for a gang")


def _reference(actions: list[Action], observed: Snapshot) -> dict[str, int]:
    """The rule as first written: rescan from the start after every move."""
    capacity = {n.name: n.gpus for n in observed.clusters[0].nodes}
    used: Counter[str] = Counter()
    held = {}
    for j in observed.clusters[0].jobs:
        held[j.id] = Counter({r.node or "": r.gpus for r in j.replicas})
        used.update(held[j.id])
    for a in actions:
        if a.op == Op.PREEMPT:
            used.subtract(held[a.job or ""])
    moves = [
        (a.workload, held[a.job or ""], Counter({r.node or "": r.gpus for r in a.replicas or []}))
        for a in actions
        if a.op == Op.MOVE
    ]

    def fits(after: Counter[str], before: Counter[str]) -> bool:
        return all(
            used[n] + after[n] - before[n] <= capacity[n] for n in after if after[n] > before[n]
        )

    order: dict[str, int] = {}
    while moves:
        i = next((i for i, (_, b, a) in enumerate(moves) if fits(a, b)), 0)
        key, before, after = moves.pop(i)
        used.update(after)
        used.subtract(before)
        order[key] = len(order)
    return order


@st.composite
def shuffles(draw: st.DrawFn) -> tuple[list[Action], Snapshot]:
    """Single-replica jobs on 2-GPU nodes, each moved to another node, preempted, or left
    where it is; the moves may wait on each other, in chains and cycles, and on the room
    the preemptions leave."""
    n_nodes = draw(st.integers(2, 6))
    nodes = [Node(name=f"n{i}", pool="p", gpus=2) for i in range(n_nodes)]
    free = {n.name: 2 for n in nodes}
    jobs, actions = [], []
    for i in range(draw(st.integers(1, 10))):
        home = draw(st.sampled_from(sorted(free)))
        if free[home] == 0:
            continue
        free[home] -= 1
        jobs.append(Job(id=str(i), workload=f"p/w{i}", replicas=[Replica(node=home, gpus=1)]))
        fate = draw(st.sampled_from(["move", "move", "preempt", "stay"]))
        if fate == "preempt":
            actions.append(
                Action(op=Op.PREEMPT, workload=f"p/w{i}", cluster="c", job=str(i), reason=WHY)
            )
        if fate != "move":
            continue
        dest = draw(st.sampled_from([n.name for n in nodes if n.name != home]))
        actions.append(
            Action(
                op=Op.MOVE,
                workload=f"p/w{i}",
                cluster="c",
                job=str(i),
                replicas=[Replica(node=dest, gpus=1)],
                reason=WHY,
            )
        )
    snap = Snapshot(now=NOW, clusters=[ClusterState(name="c", nodes=nodes, jobs=jobs)])
    return actions, snap


@given(shuffles())
def test_each_move_waits_for_the_moves_that_make_its_room(case: tuple) -> None:  # type: ignore[type-arg]
    actions, snap = case
    assert move_sequence(actions, snap) == _reference(actions, snap)
