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
and the new version waits). Cancels of other kinds (a job queued for an old version,
a fan-out candidate that lost its round) are planned again in each cycle.

Pure: the refusals come in through the snapshot, ``now`` is an argument.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from solvers.problem import Problem, node_key
from solvers.sitepolicy.backoff import backoff_seconds
from specs.snapshot import Refusal, Snapshot


def retry_at(refusal: Refusal) -> datetime:
    """When the job may be chosen as a victim again."""
    return refusal.at + timedelta(seconds=backoff_seconds(refusal.count))


def holding(observed: Snapshot, now: datetime) -> list[Refusal]:
    """The refusals whose backoff lasts at ``now``."""
    return [r for r in observed.refusals if retry_at(r) > now]


def hold_refused(problem: Problem, observed: Snapshot, now: datetime) -> None:
    """Mark the running jobs whose eviction failed lately: no victims, and not replaced
    for an edit, until retry_at; and keep those of workloads gone from the specs (not
    pruned meanwhile: their GPUs stay taken)."""
    held = {(r.cluster, r.job): r for r in holding(observed, now)}
    if not held:
        return
    for req in problem.jobs.values():
        if req.running and (refusal := held.get((req.cluster or "", req.job_id or ""))):
            req.refused, req.refused_until = refusal, retry_at(refusal)
    kept = [(c, j) for c, j in problem.orphans if (c, j.id) in held]
    problem.orphans = [(c, j) for c, j in problem.orphans if (c, j.id) not in held]
    for cluster, job in kept:
        replicas = job.replicas if job.state.holds_gpus else []
        for r in replicas:
            if r.node and (node := problem.nodes.get(node_key(cluster, r.node))) is not None:
                node.used += r.gpus
