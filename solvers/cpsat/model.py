"""The CP-SAT allocation model over node classes and job groups.

Layout after OR-Tools' shift_scheduling sample: the data (classes, groups, objective
terms) comes in, variables live in dicts keyed by tuples, each constraint family has its
own helper, and each objective tier is a linear expression built by its own helper. Every
constraint is linear, so the same model read as an LP gives the relaxation bound.

Variables (all integers, all >= 0):

* ``start[g, p]`` — jobs of group ``g`` started (their whole gang) in pool ``p``;
* ``extra[g, p]`` — elastic replicas those jobs add beyond their gang;
* ``grow[h]`` — replicas added to the running jobs of growth ``h``;
* ``nodes[c, k]`` — nodes of class ``c`` packed with pattern ``k``;
* ``in_quota[q]``, ``within_fair[q]`` — new GPUs of queue ``q``'s subtree that stay within
  its deserved quota, and beyond that within its fair share.

Hard rules: every node of a class takes exactly one pattern, the replicas placed in a pool
fill exactly the pattern slots of their size (so a gang never leaves its pool), and on
every queue level the limit holds and non-preemptible work stays within deserved.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from solvers.cpsat.classes import (
    Aggregate,
    Base,
    chain,
    floor_quota,
    partly_used,
    spread,
)
from solvers.cpsat.score import TIER_NAMES, Terms
from solvers.problem import PoolKey, Problem

LinTerms = list[tuple[cp_model.IntVar, int]]


@dataclass
class Tier:
    """One objective tier as maximised: ``sum(coef * var) + constant``, within [lo, hi]."""

    name: str
    terms: LinTerms
    constant: int
    lo: int
    hi: int

    @property
    def span(self) -> int:
        return self.hi - self.lo


@dataclass
class AllocationModel:
    problem: Problem
    agg: Aggregate
    terms: Terms
    model: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    # jobs of a group started in a pool, indexed by (group, pool)
    start: dict[tuple[int, PoolKey], cp_model.IntVar] = field(default_factory=dict)
    # elastic replicas beyond the gangs, indexed by (group, pool)
    extra: dict[tuple[int, PoolKey], cp_model.IntVar] = field(default_factory=dict)
    # replicas added to running jobs, indexed by growth
    grow: dict[int, cp_model.IntVar] = field(default_factory=dict)
    # nodes of a class packed with a pattern, indexed by (class, pattern)
    nodes: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)
    # new GPUs within deserved / then within fair share, indexed by queue
    in_quota: dict[str, cp_model.IntVar] = field(default_factory=dict)
    within_fair: dict[str, cp_model.IntVar] = field(default_factory=dict)
    # new GPUs of each queue's subtree (all work / non-preemptible work), indexed by queue
    new_gpus: dict[str, LinTerms] = field(default_factory=lambda: defaultdict(list))
    new_np_gpus: dict[str, LinTerms] = field(default_factory=lambda: defaultdict(list))
    # hard headroom per queue: GPUs it may still take (limit) / non-preemptible (deserved)
    limit_room: dict[str, int] = field(default_factory=dict)
    np_room: dict[str, int] = field(default_factory=dict)
    tiers: list[Tier] = field(default_factory=list)
    base_constraints: int = 0  # constraints of the model proper (later ones fix tiers)


def build_model(problem: Problem, base: Base, agg: Aggregate, terms: Terms) -> AllocationModel:
    m = AllocationModel(problem, agg, terms)
    _headroom(m, base)
    _add_job_variables(m)
    _add_pattern_variables(m)
    _add_slot_filling(m)
    _add_limits(m)
    _add_nonpreemptible_within_deserved(m)
    _add_quota_split(m)
    m.tiers = [
        _in_quota_tier(m),
        _fair_tier(m),
        _priority_tier(m),
        _node_tier(m, base, "partly_used", partly_used),
        _node_tier(m, base, "spread", spread),
        _cost_tier(m),
    ]
    assert tuple(t.name for t in m.tiers) == TIER_NAMES
    m.base_constraints = len(m.model.proto.constraints)
    return m


# ------------------------------------------------------------------ data-derived bounds


def _headroom(m: AllocationModel, base: Base) -> None:
    for qid, q in m.problem.queues.items():
        limit = floor_quota(q.limit)
        if limit is not None:
            m.limit_room[qid] = max(0, limit - base.alloc.get(qid, 0))
        m.np_room[qid] = max(0, (floor_quota(q.deserved) or 0) - base.alloc_np.get(qid, 0))


def _room_for(m: AllocationModel, queue: str, preemptible: bool) -> int | None:
    """GPUs the queue chain may still take for this kind of work (None = unbounded)."""
    rooms = [m.limit_room[q] for q in chain(m.problem, queue) if q in m.limit_room]
    if not preemptible:
        rooms += [m.np_room[q] for q in chain(m.problem, queue)]
    return min(rooms) if rooms else None


def _pool_slots(m: AllocationModel, pool: PoolKey, gpus: int) -> int:
    """Replicas of ``gpus`` the pool could take if nothing else were placed."""
    return sum(len(c.nodes) * (c.free // gpus) for c in m.agg.classes if c.pool == pool)


# ------------------------------------------------------------------ variables


def _add_job_variables(m: AllocationModel) -> None:
    for gi, g in enumerate(m.agg.groups):
        room = _room_for(m, g.queue, g.preemptible)
        cap_by_room = len(g.jobs) if room is None else room // (g.gang * g.gpus)
        started = []
        for p in g.pools:
            ub = min(len(g.jobs), cap_by_room, _pool_slots(m, p, g.gpus) // g.gang)
            if ub <= 0:
                continue
            v = m.model.new_int_var(0, ub, f"start[{g.name}, {p[0]}/{p[1]}]")
            m.start[gi, p] = v
            started.append(v)
            replicas: LinTerms = [(v, g.gang)]
            if g.extra > 0:
                e = m.model.new_int_var(0, ub * g.extra, f"extra[{g.name}, {p[0]}/{p[1]}]")
                m.model.add(e <= g.extra * v)
                m.extra[gi, p] = e
                replicas.append((e, 1))
            _charge(m, g.queue, g.preemptible, [(x, c * g.gpus) for x, c in replicas])
        if len(started) > 1:
            m.model.add(sum(started) <= len(g.jobs))
    for hi, h in enumerate(m.agg.growths):
        room = _room_for(m, h.queue, h.preemptible)
        ub = min(h.room, _pool_slots(m, h.pool, h.gpus), h.room if room is None else room // h.gpus)
        if ub <= 0:
            continue
        v = m.model.new_int_var(0, ub, f"grow[{h.name}]")
        m.grow[hi] = v
        _charge(m, h.queue, h.preemptible, [(v, h.gpus)])


def _charge(m: AllocationModel, queue: str, preemptible: bool, gpus: LinTerms) -> None:
    for qid in chain(m.problem, queue):
        m.new_gpus[qid].extend(gpus)
        if not preemptible:
            m.new_np_gpus[qid].extend(gpus)


def _add_pattern_variables(m: AllocationModel) -> None:
    for ci, c in enumerate(m.agg.classes):
        row = []
        for k, pattern in enumerate(m.agg.patterns[ci]):
            label = "+".join(map(str, pattern)) or "empty"
            v = m.model.new_int_var(0, len(c.nodes), f"nodes[{c.name}, {label}]")
            m.nodes[ci, k] = v
            row.append(v)
        m.model.add(sum(row) == len(c.nodes)).with_name(f"every node of {c.name} has one pattern")


# ------------------------------------------------------------------ constraint families


def _add_slot_filling(m: AllocationModel) -> None:
    """Replicas of each size placed in a pool = slots of that size its nodes' patterns offer."""
    demand: dict[tuple[PoolKey, int], LinTerms] = defaultdict(list)
    for (gi, p), v in m.start.items():
        demand[p, m.agg.groups[gi].gpus].append((v, m.agg.groups[gi].gang))
    for (gi, p), v in m.extra.items():
        demand[p, m.agg.groups[gi].gpus].append((v, 1))
    for hi, v in m.grow.items():
        h = m.agg.growths[hi]
        demand[h.pool, h.gpus].append((v, 1))
    supply: dict[tuple[PoolKey, int], LinTerms] = defaultdict(list)
    for (ci, k), v in m.nodes.items():
        pattern = m.agg.patterns[ci][k]
        for size in set(pattern):
            supply[m.agg.classes[ci].pool, size].append((v, pattern.count(size)))
    for key in sorted(set(demand) | set(supply)):
        lhs = sum(c * v for v, c in supply.get(key, []))
        rhs = sum(c * v for v, c in demand.get(key, []))
        m.model.add(lhs == rhs).with_name(f"slots[{key[0][0]}/{key[0][1]}, {key[1]} GPUs]")


def _add_limits(m: AllocationModel) -> None:
    for qid, room in sorted(m.limit_room.items()):
        if m.new_gpus.get(qid):
            m.model.add(_sum(m.new_gpus[qid]) <= room).with_name(f"limit[{qid}]")


def _add_nonpreemptible_within_deserved(m: AllocationModel) -> None:
    for qid, room in sorted(m.np_room.items()):
        if m.new_np_gpus.get(qid):
            m.model.add(_sum(m.new_np_gpus[qid]) <= room).with_name(f"np_within_deserved[{qid}]")


def _add_quota_split(m: AllocationModel) -> None:
    """Split each queue's new GPUs into within-deserved, within-fair-share and beyond."""
    for qid in sorted(m.problem.queues):
        new = m.new_gpus.get(qid)
        if not new:
            continue
        room_d, room_f = m.terms.room_deserved[qid], m.terms.room_fair[qid]
        total = _sum(new)
        parts = []
        if room_d > 0:
            m.in_quota[qid] = m.model.new_int_var(0, room_d, f"in_quota[{qid}]")
            parts.append(m.in_quota[qid])
        if room_f > 0:
            m.within_fair[qid] = m.model.new_int_var(0, room_f, f"within_fair[{qid}]")
            parts.append(m.within_fair[qid])
        if parts:
            m.model.add(sum(parts) <= total).with_name(f"quota_split[{qid}]")


# ------------------------------------------------------------------ objective tiers


def _placed_gpus(m: AllocationModel) -> list[tuple[cp_model.IntVar, int, int, PoolKey]]:
    """(variable, GPUs per unit, job priority, pool) for every placement variable."""
    out = []
    for (gi, p), v in m.start.items():
        g = m.agg.groups[gi]
        out.append((v, g.gang * g.gpus, g.priority, p))
    for (gi, p), v in m.extra.items():
        g = m.agg.groups[gi]
        out.append((v, g.gpus, g.priority, p))
    for hi, v in m.grow.items():
        h = m.agg.growths[hi]
        out.append((v, h.gpus, h.priority, h.pool))
    return out


def _new_gpu_cap(m: AllocationModel) -> int:
    """Most new GPUs any answer can place: free GPUs, and demand."""
    free = sum(len(c.nodes) * c.free for c in m.agg.classes)
    demand = sum(upper(v) * gpus for v, gpus, _, _ in _placed_gpus(m))
    return min(free, demand)


def _tier(name: str, terms: LinTerms, constant: int = 0, span: int | None = None) -> Tier:
    """A tier's range from its variables' bounds, or tighter from ``span`` (data-derived).

    Maximised tiers have positive coefficients, minimised ones (as maximised) negative.
    """
    hi = constant + sum(c * upper(v) for v, c in terms if c > 0)
    lo = constant + sum(c * upper(v) for v, c in terms if c < 0)
    if span is not None:
        hi, lo = min(hi, constant + span), max(lo, constant - span)
    return Tier(name, terms, constant, lo, hi)


def _in_quota_tier(m: AllocationModel) -> Tier:
    terms = [(v, m.terms.rank_weight[qid]) for qid, v in sorted(m.in_quota.items())]
    return _tier("in_quota", terms)


def _fair_tier(m: AllocationModel) -> Tier:
    cap = _new_gpu_cap(m)
    placed = [(v, gpus) for v, gpus, _, _ in _placed_gpus(m)]
    fair = [(v, 1) for _, v in sorted(m.within_fair.items())]
    span = cap + sum(min(cap, upper(v)) for v, _ in fair)
    return _tier("fair", placed + fair, span=span)


def _priority_tier(m: AllocationModel) -> Tier:
    levels = m.terms.priority_level
    terms = [(v, gpus * levels[prio]) for v, gpus, prio, _ in _placed_gpus(m) if levels[prio]]
    return _tier("priority", terms, span=_new_gpu_cap(m) * max(levels.values(), default=0))


def _node_tier(
    m: AllocationModel, base: Base, name: str, penalty: Callable[[int, int], int]
) -> Tier:
    """A minimised per-node penalty of the free GPUs left: negated coefficients."""
    modelled = {n for c in m.agg.classes for n in c.nodes}
    constant = -sum(
        penalty(m.problem.nodes[k].capacity, free)
        for k, free in base.free.items()
        if k not in modelled
    )
    terms = []
    for (ci, k), v in m.nodes.items():
        c = m.agg.classes[ci]
        cost = penalty(c.capacity, c.free - sum(m.agg.patterns[ci][k]))
        if cost:
            terms.append((v, -cost))
    return _tier(name, terms, constant)


def _cost_tier(m: AllocationModel) -> Tier:
    units = m.terms.cost_units
    terms = [(v, -gpus * units[p]) for v, gpus, _, p in _placed_gpus(m) if units[p]]
    return _tier("cost", terms, span=_new_gpu_cap(m) * max(units.values(), default=0))


def _sum(terms: LinTerms) -> cp_model.LinearExpr:
    return cp_model.LinearExpr.weighted_sum([v for v, _ in terms], [c for _, c in terms])


def upper(v: cp_model.IntVar) -> int:
    domain = v.proto.domain
    return int(domain[len(domain) - 1])  # the proto's repeated field has no negative index


def tier_expr(tier: Tier) -> cp_model.LinearExpr:
    return _sum(tier.terms)


def lexicographic_weights(tiers: list[Tier]) -> tuple[int, ...]:
    """Weights that make one number order answers exactly as the tiers do."""
    weights = [1]
    for tier in reversed(tiers[1:]):
        weights.append(weights[-1] * (tier.span + 1))
    return tuple(reversed(weights))
