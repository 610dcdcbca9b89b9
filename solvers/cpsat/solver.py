"""Solve the class model lexicographically, expand it to nodes, and report its quality.

1. Aggregate nodes into classes and pending jobs into groups; build the model.
2. Solve the tiers one CP-SAT stage at a time: each stage maximises its tier with the
   tiers above held at their achieved values, starting from the previous answer as a
   hint. (One objective with lexicographic weights would need coefficients beyond int64
   at 4,000 nodes; even two or three tiers merged measured slower and less predictable.)
3. Expand the counts into nodes, derive the grants' reasons and the pending reasons.
4. Measure: the LP relaxation per tier (GLOP), and one combined objective and bound.

Deterministic for a fixed seed: each stage runs one search worker (``Policy.workers`` is
not used: parallel CP-SAT is deterministic only interleaved, which measured 10x slower on
this model), and expansion breaks every tie by name. A search cut short by the time limit
keeps the best answer found so far (and is then reproducible only as far as the clock is).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

from ortools.sat.python import cp_model
from ortools.sat.python.cp_model_helper import SatParameters

from solvers.cpsat.bound import TierLP, lp_tier_bounds
from solvers.cpsat.classes import aggregate, base_state
from solvers.cpsat.expand import Counts, expand, grants
from solvers.cpsat.explain import pending_reasons
from solvers.cpsat.model import AllocationModel, Tier, build_model, lexicographic_weights, tier_expr
from solvers.cpsat.score import Score, objective_terms, score
from solvers.policy import CPSAT_OWN_LIMIT, DEFAULT_POLICY, Deadline, Policy
from solvers.problem import Problem
from solvers.session import Grant, Session
from specs.actions import Reason


@dataclass(frozen=True)
class TierReport:
    name: str
    value: int  # as maximised (minimised tiers are negative)
    bound: float  # LP bound given the tiers above as achieved
    gap: float  # (bound - value) / max(1, |bound|)


@dataclass(frozen=True)
class StageReport:
    tier: str
    status: str
    seconds: float


@dataclass(frozen=True)
class SolveReport:
    status: str  # OPTIMAL | FEASIBLE | UNKNOWN (nothing found: the answer places nothing)
    objective: float  # tiers combined with lexicographic weights, 0 = worst possible
    bound: float  # a valid upper bound on ``objective`` from the LP relaxation
    gap: float  # (bound - objective) / bound
    wall_seconds: float  # model build + CP-SAT + expansion
    lp_seconds: float
    tiers: tuple[TierReport, ...]
    stages: tuple[StageReport, ...]
    model_size: dict[str, int]
    binding: tuple[str, ...]  # hard rows with no room left, e.g. "limit[project:chem]"
    greedy_objective: float | None = None


@dataclass(frozen=True)
class CpsatResult:
    grants: dict[str, Grant]  # workload -> node keys of every replica, pool, reason
    pending: dict[str, Reason]  # workload -> why it waits
    score: Score
    report: SolveReport
    weights: tuple[int, ...]
    lows: tuple[int, ...]

    def objective_of(self, other: Score) -> float:
        """Another answer's objective, in this report's units."""
        return float(_combined(other, self.weights, self.lows))


def solve(
    problem: Problem,
    session: Session,
    policy: Policy = DEFAULT_POLICY,
    *,
    greedy: Mapping[str, Grant] | None = None,
    with_bound: bool = True,
    bound_if_optimal: bool = True,
    deadline: Deadline | None = None,
) -> CpsatResult:
    """Place pending work with CP-SAT; running jobs stay where they are.

    ``session`` supplies the fair shares only (it may already be mutated by the greedy).
    ``greedy``, when given, is scored in the same units for the report. The search gets
    ``policy.cpsat_time_limit`` seconds, fewer if the plan's ``deadline`` is nearer; a
    stage stopped by the time limit is recorded there as cut short. The LP relaxation
    bounds each tier (``with_bound``); a caller that reads the bound only when some stage
    was not proven optimal says so (not ``bound_if_optimal``) and skips it otherwise.
    """
    deadline = deadline or Deadline()
    started = time.perf_counter()
    # 1. data and model
    base = base_state(problem)
    terms = objective_terms(problem, session, base)
    agg = aggregate(problem, base)
    m = build_model(problem, base, agg, terms)
    weights = lexicographic_weights(m.tiers)
    # 2. lexicographic stages
    left = deadline.left()
    limit = min(policy.cpsat_time_limit, left)
    which = (
        f"{CPSAT_OWN_LIMIT} ({policy.cpsat_time_limit:g} s)"
        if policy.cpsat_time_limit <= left
        else "the plan's time limit"
    )
    values, stages = _solve_stages(m, policy, started, limit)
    for stage in stages:
        if stage.status in ("FEASIBLE", "SKIPPED", "UNKNOWN"):
            deadline.cut("cp-sat", f"its {stage.tier} stage stopped at {which}")
    # 3. back to nodes
    counts = _counts(m, values)
    placed = expand(problem, agg, counts, base.free)
    granted = grants(problem, base, session.fair, placed)
    pending = pending_reasons(problem, base, m.limit_room, m.np_room, placed)
    answer = score(problem, session, granted)
    wall = time.perf_counter() - started
    # 4. quality
    lows = tuple(t.lo for t in m.tiers)
    achieved = list(answer.key())
    statuses = {s.status for s in stages}
    if not stages:  # no tier had any choice: placing nothing is optimal
        status = "OPTIMAL"
    elif not values:
        status = "UNKNOWN"
    else:
        status = "OPTIMAL" if statuses == {"OPTIMAL"} else "FEASIBLE"
    lp_started = time.perf_counter()
    if with_bound and (bound_if_optimal or status != "OPTIMAL"):
        bounds = lp_tier_bounds(m, achieved)
    else:
        bounds = [float(t.hi) for t in m.tiers]
    lp_seconds = time.perf_counter() - lp_started
    objective = _combined(answer, weights, lows)
    bound = _combined_bound(m.tiers, achieved, bounds, weights)
    report = SolveReport(
        status=status,
        objective=float(objective),
        bound=float(bound),
        gap=float((bound - objective) / bound) if bound > 0 else 0.0,
        wall_seconds=wall,
        lp_seconds=lp_seconds,
        tiers=tuple(
            TierReport(t.name, v, b, (b - v) / max(1.0, abs(b)))
            for t, v, b in zip(m.tiers, achieved, bounds, strict=True)
        ),
        stages=tuple(stages),
        model_size={
            "classes": len(agg.classes),
            "groups": len(agg.groups) + len(agg.growths),
            "patterns": len(m.nodes),
            "variables": len(m.model.proto.variables),
            "constraints": m.base_constraints,
        },
        binding=_binding(m, values),
        greedy_objective=(
            float(_combined(score(problem, session, greedy), weights, lows))
            if greedy is not None
            else None
        ),
    )
    return CpsatResult(granted, pending, answer, report, weights, lows)


def _solve_stages(
    m: AllocationModel, policy: Policy, started: float, limit: float
) -> tuple[list[int], list[StageReport]]:
    """One CP-SAT solve per tier, each holding the tiers above at what they achieved.

    A stage may spend half the time left (the last one all of it), so a hard packing
    stage cannot starve the tiers after it, while the tiers that matter most get most.
    """
    values: list[int] = []
    reports: list[StageReport] = []
    lp = TierLP(m)
    for tier in m.tiers:  # tiers with nothing to choose are held at once
        if tier.span <= 0:
            lp.hold(tier, tier.hi)
    tiers = [t for t in m.tiers if t.span > 0]  # the others leave nothing to choose
    for i, tier in enumerate(tiers):
        remaining = limit - (time.perf_counter() - started)
        if remaining <= 0:
            reports.append(StageReport(tier.name, "SKIPPED", 0.0))
            continue
        stage_started = time.perf_counter()
        # nothing can beat the LP bound: an answer that meets it needs no proof
        target = math.floor(lp.bound(tier) + 1e-6) - tier.constant
        if values and sum(c * values[v.index] for v, c in tier.terms) >= target:
            reports.append(StageReport(tier.name, "OPTIMAL", time.perf_counter() - stage_started))
            achieved = sum(c * values[v.index] for v, c in tier.terms)
        else:
            budget = remaining if i == len(tiers) - 1 else remaining / 2
            m.model.maximize(tier_expr(tier))
            solver = cp_model.CpSolver()
            _configure(solver.parameters, policy, budget, tier.name)
            status = solver.solve(m.model, _StopAt(target))
            if status == cp_model.FEASIBLE and solver.objective_value >= target:
                status = cp_model.OPTIMAL  # stopped at the LP bound: proven optimal
            reports.append(
                StageReport(tier.name, _status_name(status), time.perf_counter() - stage_started)
            )
            if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                break
            values = list(solver.response_proto.solution)
            achieved = sum(c * values[v.index] for v, c in tier.terms)
        m.model.add(tier_expr(tier) >= achieved).with_name(f"keep[{tier.name}]")
        lp.hold(tier, achieved + tier.constant)
        m.model.proto.clear_solution_hint()  # the next stage starts from this answer
        for index, value in enumerate(values):
            m.model.proto.solution_hint.vars.append(index)
            m.model.proto.solution_hint.values.append(value)
    return values, reports


class _StopAt(cp_model.CpSolverSolutionCallback):
    """Ends the search once the objective reaches ``target``, the LP bound."""

    def __init__(self, target: int) -> None:
        super().__init__()
        self.target = target

    def on_solution_callback(self) -> None:
        if self.objective_value >= self.target:
            self.stop_search()


def _status_name(status: object) -> str:
    names = {
        cp_model.OPTIMAL: "OPTIMAL",
        cp_model.FEASIBLE: "FEASIBLE",
        cp_model.INFEASIBLE: "INFEASIBLE",
        cp_model.MODEL_INVALID: "MODEL_INVALID",
    }
    return next((name for code, name in names.items() if code == status), "UNKNOWN")


def _configure(params: SatParameters, policy: Policy, seconds: float, tier: str) -> None:
    params.random_seed = policy.seed
    params.max_time_in_seconds = seconds
    # One search worker: CP-SAT is deterministic with one worker (or interleaved workers,
    # which measured 10x slower here), and plans must be reproducible.
    params.num_workers = 1
    # Ctrl-C is the command line's to handle (an apply stops after the action in flight):
    # CP-SAT's own handler, left behind, set SIGINT back to the default after every solve,
    # and the next Ctrl-C killed the process outright
    params.catch_sigint_signal = False
    params.linearization_level = 2
    # Placing GPUs is nearly a flow problem whose LP is almost integral: branching on LP
    # values reached the optimum 10-50x sooner than the default search on the benchmark
    # shapes. Packing is true bin-packing, where the default search proved optimality
    # sooner on random small clusters (worst case 3.4 s against 10.5 s).
    packing = tier in ("partly_used", "spread")
    params.search_branching = cp_model.AUTOMATIC_SEARCH if packing else cp_model.LP_SEARCH


def _counts(m: AllocationModel, values: list[int]) -> Counts:
    def read(v: cp_model.IntVar) -> int:
        return values[v.index] if values else 0

    return Counts(
        start={k: read(v) for k, v in m.start.items()},
        extra={k: read(v) for k, v in m.extra.items()},
        grow={k: read(v) for k, v in m.grow.items()},
        nodes={
            k: read(v) if values else (len(m.agg.classes[k[0]].nodes) if k[1] == 0 else 0)
            for k, v in m.nodes.items()
        },
    )


def _binding(m: AllocationModel, values: list[int]) -> tuple[str, ...]:
    """Names of the limit and non-preemptible rows the answer fills exactly."""

    def used(terms: list[tuple[cp_model.IntVar, int]]) -> int:
        return sum(c * values[v.index] for v, c in terms) if values else 0

    out = [
        f"limit[{q}]"
        for q, room in sorted(m.limit_room.items())
        if m.new_gpus.get(q) and used(m.new_gpus[q]) == room
    ]
    out += [
        f"np_within_deserved[{q}]"
        for q, room in sorted(m.np_room.items())
        if m.new_np_gpus.get(q) and used(m.new_np_gpus[q]) == room
    ]
    return tuple(out)


def _combined(s: Score, weights: tuple[int, ...], lows: tuple[int, ...]) -> int:
    return sum(w * (t - lo) for w, t, lo in zip(weights, s.key(), lows, strict=True))


def _combined_bound(
    tiers: list[Tier], achieved: list[int], bounds: list[float], weights: tuple[int, ...]
) -> int:
    """A valid bound on the combined objective.

    Walk the tiers while the LP proves the achieved value optimal (given the tiers above);
    at the first tier it does not, any better answer has at most the LP's value there and
    anything in the tiers below.
    """
    total = 0
    for k, tier in enumerate(tiers):
        best = math.floor(bounds[k] + 1e-6)
        if best <= achieved[k]:
            total += weights[k] * (achieved[k] - tier.lo)
            continue
        total += weights[k] * (best - tier.lo)
        return total + sum(
            w * t.span for w, t in zip(weights[k + 1 :], tiers[k + 1 :], strict=True)
        )
    return total
