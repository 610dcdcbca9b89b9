"""The CP-SAT allocation model: pending work placed on node classes, tiers lexicographic.

``solve(problem, session, policy)`` returns grants and pending reasons in the greedy's
shape, plus a report (status, objective, LP bound, gap, seconds); ``score(problem,
session, grants)`` rates any allocator's grants in the same units, so the caller keeps
whichever answer is better.
"""

from solvers.cpsat.score import Score, score
from solvers.cpsat.solver import CpsatResult, SolveReport, StageReport, TierReport, solve

__all__ = ["CpsatResult", "Score", "SolveReport", "StageReport", "TierReport", "score", "solve"]
