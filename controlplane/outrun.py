"""Waiting candidates that would take the GPUs a plan frees for other work.

A fan-out candidate waits in its cluster's queue until its GPUs are free, and the cluster
starts it the moment they are. A plan runs its evictions first (``Plan.execution_order``),
so the GPUs they free reach such a candidate before the plan's own moves and submits
arrive; where those were planned onto the same GPUs they find them taken (a submit is
refused, a move waits). The plan's model keeps candidates waiting (controlplane/converge.py:
which of them starts is the cluster's decision), and for that to hold on the cluster, a
candidate the cluster would start on GPUs the plan gives to other work is cancelled with
the evictions. The workload is then planned again: its new candidates are submitted with
the plan's last actions, once the rest has landed.

The cluster's pass is modelled as the simulator and Slurm's backfill run it: waiting jobs
in the order they were submitted, each entry on its own node, the tightest that fits. A
candidate that fits now starts before the plan runs, the others once the evictions and
moves have run (a move's new place counted as the plan's, like its other placements).
The plan keeps room for one that fits now (solvers/session.py), but a round sees the
world its earlier rounds made: there a candidate may fit on GPUs an earlier round freed
and a later one gives away. Either way, a candidate the plan leaves no room where it
would start is cancelled; the cancels run before any eviction
(:func:`~controlplane.plan.execution_order`). Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from datetime import UTC, datetime

from controlplane.converge import VIRTUAL
from controlplane.plan import shrinks
from solvers import reasons
from solvers.order import job_id_order
from specs.actions import Action, Op
from specs.snapshot import ClusterState, Job, JobState, Node, Replica, Snapshot

_EPOCH = datetime.min.replace(tzinfo=UTC)


def outrun_candidates(
    actions: list[Action], observed: Snapshot, kept: Collection[tuple[str, str]]
) -> list[Action]:
    """The cancels of waiting candidates that would start on GPUs ``actions`` free for
    other work, ``observed`` the world they were planned against; none of a job whose
    cancel failed lately (``kept``, (cluster, job id): the eviction backoff leaves it as it
    is, holding its room)."""
    cancels: list[Action] = []
    for state in observed.clusters:
        left = {j for c, j in kept if c == state.name}  # they start where they start
        cancels += _outrun(state, [a for a in actions if a.cluster == state.name], left)
    return cancels


def _waiting(state: ClusterState, named: set[str]) -> list[Job]:
    """Candidates that wait for the cluster to place them, in the order it starts them."""
    jobs = [
        j
        for j in state.jobs
        if j.state == JobState.PENDING
        and j.candidate is not None
        and j.workload is not None
        and j.replicas
        and not j.id.startswith(VIRTUAL)
        and j.id not in named
    ]
    return sorted(jobs, key=lambda j: (j.submitted_at or _EPOCH, job_id_order(j.id)))


def _outrun(state: ClusterState, actions: list[Action], left: set[str]) -> list[Action]:
    waiting = _waiting(state, {a.job for a in actions if a.job})
    if not waiting:
        return []
    nodes = {n.name: n for n in state.nodes if n.schedulable}
    jobs = {j.id: j for j in state.jobs if j.state.holds_gpus}
    used: Counter[str] = Counter()
    for job in jobs.values():
        used.update(_per_node(job.replicas))
    freed: Counter[str] = Counter()  # by the evictions, which run first
    planned = Counter(used)  # GPUs used once every action has run
    takers: dict[str, set[str]] = {}  # node -> the workloads the plan puts there
    for a in actions:
        held = jobs.get(a.job or "")
        before = _per_node(held.replicas if held is not None else [])
        gone = a.op in (Op.CANCEL, Op.PREEMPT)
        after = Counter() if gone else _per_node(a.replicas or [])
        if a.op.evicts or shrinks(a):  # runs first: a move frees its old place as it lands
            freed.update(before - after)
        planned.subtract(before)
        planned.update(after)
        for node in after - before:
            takers.setdefault(node, set()).add(a.workload)
    now = {n: node.gpus - used[n] for n, node in nodes.items()}
    free = {n: now[n] + freed[n] for n in nodes}
    room = {n: node.gpus - planned[n] for n, node in nodes.items()}
    cancels = []
    for job in waiting:
        picks = _pass(job, nodes, now)  # one that fits already starts before the plan runs
        early = picks is not None
        if picks is None:
            picks = _pass(job, nodes, free)
        if picks is None:
            continue  # it waits on, whatever the plan frees
        short = sorted({n for n, g in picks if room[n] < g})
        if short and job.id not in left:
            others = sorted({w for n in short for w in takers.get(n, ())})
            why = reasons.candidate_outrun(job.id, short, others or ["other work"])
            cancels.append(
                Action(
                    op=Op.CANCEL,
                    workload=job.workload or "",
                    cluster=state.name,
                    job=job.id,
                    reason=why,
                )
            )
            continue
        for n, g in picks:
            free[n] -= g
            room[n] -= g
            if early:
                now[n] -= g
    return cancels


def _pass(job: Job, nodes: dict[str, Node], free: dict[str, int]) -> list[tuple[str, int]] | None:
    """Where the cluster's pass starts ``job`` now: each entry on its own node of its pool,
    the tightest that fits, then by name; None if some entry does not fit."""
    picks: list[tuple[str, int]] = []
    for r in sorted(job.replicas, key=lambda r: -r.gpus):
        taken = {n for n, _ in picks}
        fits = sorted(
            (free[n], n)
            for n, node in nodes.items()
            if node.pool == job.pool and n not in taken and free[n] >= r.gpus
        )
        if not fits:
            return None
        picks.append((fits[0][1], r.gpus))
    return picks


def _per_node(replicas: Iterable[Replica]) -> Counter[str]:
    gpus: Counter[str] = Counter()
    for r in replicas:
        if r.node is not None:
            gpus[r.node] += r.gpus
    return gpus
