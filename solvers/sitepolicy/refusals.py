"""Backoff for evictions that fail: a job an apply could not act on is no victim for a while.

An eviction the cluster refuses (``scancel`` denied, a job of the control plane's that
another user now owns, an API server that forbids the delete) failed the same way in every
plan after it: the same victim was chosen each cycle, and the failure held back the rest
of its cluster's actions (controlplane/apply.py), so the work it was evicted for never
started elsewhere either. The store counts the failed attempts in a row on each running
job (``Snapshot.refusals``); while the backoff after the latest lasts (1, 2, 4 … minutes,
at most an hour, as for a failed job: backoff.py), the job is no victim, and the
disruptive steps look for room elsewhere. Once it has passed, the job may be chosen again,
and one success ends the streak.

The same holds for a job whose workload left the specs (its prune is not planned again,
and its GPUs stay taken) or was edited so that it needs a new job (it runs on as it is,
and the new version waits), and for every other cancel: a job queued for an old version,
on nodes others took or in a removed pool (it stays its workload's job: no new one is
submitted beside it), a second job of one workload or a fan-out candidate that lost its
round, the rest of a gang a replica of which failed. Those are left out when the problem
is built (``build_problem``'s ``kept``).

Pure: the refusals come in through the snapshot, ``now`` is an argument.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from solvers.problem import Problem
from solvers.sitepolicy.backoff import backoff_seconds
from specs.snapshot import Refusal, Snapshot


def retry_at(refusal: Refusal) -> datetime:
    """When the job may be chosen as a victim again."""
    return refusal.at + timedelta(seconds=backoff_seconds(refusal.count))


def holding(observed: Snapshot, now: datetime) -> list[Refusal]:
    """The refusals whose backoff lasts at ``now``."""
    return [r for r in observed.refusals if retry_at(r) > now]


def hold_refused(problem: Problem, held: list[Refusal]) -> None:
    """Mark the running jobs whose eviction failed lately (``held``, :func:`holding`): no
    victims, and not replaced for an edit, until retry_at; and keep every such failure on
    the problem, for what waits to say. (The cancels of jobs that are held are left out
    where the problem is built: ``build_problem``'s ``kept``.)"""
    problem.refused = {(r.cluster, r.job): (r, retry_at(r)) for r in held}
    for req in problem.jobs.values():
        if req.running and (found := problem.refused.get((req.cluster or "", req.job_id or ""))):
            req.refused, req.refused_until = found
