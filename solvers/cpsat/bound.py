"""The LP relaxation of the class model, as a quality yardstick for the integer answer.

Read straight from the CP-SAT proto (every constraint of the model is linear), so the
relaxation is exactly the model's, and solved with GLOP one tier at a time: tier ``k`` is
maximised with the tiers above it held at the values the integer answer achieved. The
result bounds how much better tier ``k`` could be given the tiers above.
"""

from __future__ import annotations

import math
from typing import Any

from ortools.linear_solver import pywraplp

from solvers.cpsat.model import AllocationModel, Tier

INT64_EDGE = 2**62


class TierLP:
    """The relaxation, built once; tiers are bounded in order, each then held at its value.

    Used twice: during the staged solve, to stop a stage as soon as its answer meets the
    LP bound (nothing can do better, so the proof is free), and afterwards as the report's
    quality yardstick.
    """

    def __init__(self, m: AllocationModel) -> None:
        self.solver = pywraplp.Solver.CreateSolver("GLOP")
        proto = m.model.proto
        self.x = [
            self.solver.NumVar(float(lo), float(hi), "") for lo, hi in map(_hull, proto.variables)
        ]
        for i in range(m.base_constraints):
            ct = proto.constraints[i]
            if not ct.has_linear() or len(ct.enforcement_literal):
                raise ValueError(f"constraint {ct.name!r} is not linear; the LP cannot read it")
            lo, hi = _hull(ct.linear)
            row = self.solver.RowConstraint(
                -math.inf if lo <= -INT64_EDGE else float(lo),
                math.inf if hi >= INT64_EDGE else float(hi),
                "",
            )
            for var, coef in zip(ct.linear.vars, ct.linear.coeffs, strict=True):
                row.SetCoefficient(self.x[var], float(coef))

    def bound(self, tier: Tier) -> float:
        """The LP optimum of ``tier`` (constant included) given the tiers held so far."""
        objective = self.solver.Objective()
        objective.Clear()
        for var, coef in tier.terms:
            objective.SetCoefficient(self.x[var.index], float(coef))
        objective.SetMaximization()
        if self.solver.Solve() != pywraplp.Solver.OPTIMAL:
            return float(tier.hi)  # no LP answer: fall back to the trivial bound
        return float(objective.Value() + tier.constant)

    def hold(self, tier: Tier, value: int) -> None:
        """From now on ``tier`` keeps at least ``value`` (constant included)."""
        row = self.solver.RowConstraint(float(value - tier.constant), math.inf, "")
        for var, coef in tier.terms:
            row.SetCoefficient(self.x[var.index], float(coef))


def lp_tier_bounds(m: AllocationModel, achieved: list[int]) -> list[float]:
    """Per tier, the LP optimum given the tiers above at their ``achieved`` values."""
    lp = TierLP(m)
    bounds: list[float] = []
    for tier, value in zip(m.tiers, achieved, strict=True):
        bounds.append(max(float(value), lp.bound(tier)))
        lp.hold(tier, value)
    return bounds


def _hull(item: Any) -> tuple[int, int]:
    """Smallest and largest value of a proto domain (repeated fields lack negative indices)."""
    domain = item.domain
    return int(domain[0]), int(domain[len(domain) - 1])
