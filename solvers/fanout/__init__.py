"""Fan-out (rv-style): one workload submitted as several candidates; the first to run wins.

:mod:`~solvers.fanout.candidates` enumerates, judges and chooses the candidates;
:mod:`~solvers.fanout.submission` gates them on quota and turns them into submits.
"""

from solvers.fanout.candidates import (
    Candidate,
    Mode,
    Status,
    Verdict,
    backfill_time_min,
    choose,
    dominates,
    enumerate_candidates,
    node_counts,
    rank_key,
)
from solvers.fanout.submission import (
    FanOutPlan,
    describe_cost,
    describe_start,
    plan_fan_out,
    quota_gate,
    submit_action,
)
from specs.actions import NEVER, Estimate

__all__ = [
    "NEVER",
    "Candidate",
    "Estimate",
    "FanOutPlan",
    "Mode",
    "Status",
    "Verdict",
    "backfill_time_min",
    "choose",
    "describe_cost",
    "describe_start",
    "dominates",
    "enumerate_candidates",
    "node_counts",
    "plan_fan_out",
    "quota_gate",
    "rank_key",
    "submit_action",
]
