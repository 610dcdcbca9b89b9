"""The objective, as a function of concrete grants, so any allocator's answer can be scored.

Six tiers, compared lexicographically (each matters only when all tiers above it tie):

1. ``in_quota`` — new GPUs within deserved quota, counted on every level of the queue tree
   (a project's and its department's), each weighted by the queue's rank level.
2. ``fair`` — every new GPU counts once, and once more where its queue (on every level)
   stays within its fair share: over-quota GPUs are welcome, but they go to the queues
   furthest below their fair share first.
3. ``priority`` — new GPUs weighted by the job's priority level: inside a queue the
   higher-priority jobs are served first (KAI job order).
4. ``partly_used`` (lower is better) — nodes left neither empty nor full after the pass.
5. ``spread`` (lower is better) — free times used GPUs summed over nodes: free GPUs
   gathered on few nodes (KAI's fewest-free-first bin-packing).
6. ``cost`` (lower is better) — new GPUs times the pool's cost per GPU-hour, scaled so the
   dearest pool is 1,000 units.

The CP-SAT model maximises exactly these tiers, so ``score`` of its own grants equals the
objective it reports, and the greedy's grants are scored in the same units.
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from solvers.cpsat.classes import Base, base_state, chain, floor_quota, partly_used, spread
from solvers.problem import PoolKey, Problem
from solvers.session import Grant, Session

COST_SCALE = 1000
TIER_NAMES = ("in_quota", "fair", "priority", "partly_used", "spread", "cost")


@functools.total_ordering
@dataclass(frozen=True)
class Score:
    in_quota: int
    fair: int
    priority: int
    partly_used: int  # lower is better
    spread: int  # lower is better
    cost: int  # lower is better

    def key(self) -> tuple[int, ...]:
        """The tiers as maximised: larger is better, lexicographically."""
        return (
            self.in_quota,
            self.fair,
            self.priority,
            -self.partly_used,
            -self.spread,
            -self.cost,
        )

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Score):
            return NotImplemented
        return self.key() < other.key()

    def value(self, weights: tuple[int, ...]) -> int:
        """One number: the tiers (as maximised) times lexicographic weights."""
        return sum(w * t for w, t in zip(weights, self.key(), strict=True))


@dataclass(frozen=True)
class Terms:
    """Per-instance coefficients of the objective, shared by the model and :func:`score`."""

    rank_weight: dict[str, int]  # queue -> weight of its in-quota GPUs
    room_deserved: dict[str, int]  # queue -> new GPUs that stay within deserved
    room_fair: dict[str, int]  # queue -> further new GPUs that stay within fair share
    priority_level: dict[int, int]  # job priority -> 0 (lowest) .. levels - 1
    cost_units: dict[PoolKey, int]  # pool -> cost per GPU in model units


def objective_terms(problem: Problem, session: Session, base: Base) -> Terms:
    ranks = sorted({q.priority for q in problem.queues.values()})
    rank_weight = {qid: 1 + ranks.index(q.priority) for qid, q in problem.queues.items()}
    room_d: dict[str, int] = {}
    room_f: dict[str, int] = {}
    for qid, q in problem.queues.items():
        held = base.alloc.get(qid, 0)
        deserved = floor_quota(q.deserved) or 0
        fair = floor_quota(session.fair.get(qid, 0.0)) or 0
        room_d[qid] = max(0, deserved - held)
        room_f[qid] = max(0, fair - max(deserved, held))
    priorities = sorted({j.priority for j in problem.jobs.values()})
    top_cost = max((p.cost_per_gpu_hour for p in problem.pools.values()), default=0.0)
    cost_units = {
        k: round(COST_SCALE * p.cost_per_gpu_hour / top_cost) if top_cost > 0 else 0
        for k, p in problem.pools.items()
    }
    return Terms(rank_weight, room_d, room_f, {p: i for i, p in enumerate(priorities)}, cost_units)


def new_replicas(problem: Problem, key: str, grant: Grant) -> list[str]:
    """Node keys of the replicas a grant adds (a running job keeps the ones it has)."""
    job = problem.jobs[key]
    if not job.running:
        return list(grant.nodes)
    added = Counter(grant.nodes)
    added.subtract(Counter(job.placed))
    return sorted(added.elements())


def score(problem: Problem, session: Session, grants: Mapping[str, Grant]) -> Score:
    """The objective of ``grants`` (new or grown workloads) against the state before the pass.

    Only the session's fair shares are read: allocators mutate their session, and the
    score must see the state before them.
    """
    base = base_state(problem)
    terms = objective_terms(problem, session, base)
    new_by_queue: dict[str, int] = defaultdict(int)
    used_by_node: dict[str, int] = defaultdict(int)
    placed = priority = cost = 0
    for key, grant in grants.items():
        job = problem.jobs[key]
        added = new_replicas(problem, key, grant)
        gpus = len(added) * job.gpus
        for qid in chain(problem, job.queue):
            new_by_queue[qid] += gpus
        for node in added:
            used_by_node[node] += job.gpus
        placed += gpus
        priority += terms.priority_level[job.priority] * gpus
        cost += terms.cost_units[grant.pool] * gpus
    in_quota, fair = 0, placed
    for qid in problem.queues:
        n = new_by_queue.get(qid, 0)
        inq = min(n, terms.room_deserved[qid])
        in_quota += terms.rank_weight[qid] * inq
        fair += min(n - inq, terms.room_fair[qid])
    after = [
        (problem.nodes[k].capacity, free - used_by_node.get(k, 0)) for k, free in base.free.items()
    ]
    return Score(
        in_quota,
        fair,
        priority,
        sum(partly_used(c, f) for c, f in after),
        sum(spread(c, f) for c, f in after),
        cost,
    )
