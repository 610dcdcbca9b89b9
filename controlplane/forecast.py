"""Start forecasts for fan-out candidates, asked of the clusters (this module has side effects).

The fan-out choice (solvers/fanout/) is pure: it takes each candidate's estimated start
as an input. This module gathers those estimates. It enumerates the candidates of the
fan-out workloads that wait for a start — after the same site-policy checks a plan makes,
so no cluster is asked about work that may not start anyway — turns each into the
submit it would be, and asks the cluster's adapter if it can forecast
(:class:`Forecaster`): Slurm answers with ``sbatch --test-only`` (and, for a backfill
candidate, from the reservations in its queue), the simulator with "now" when the request
fits at once. Adapters without the capability, and errors, give "unknown".

Every identical request is asked once per run (:class:`ForecastRun` caches by request),
so two workloads of the same shape cost one ``--test-only`` call — each of which uses up
a Slurm job id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from adapters.base import Adapter, AdapterError
from controlplane.activity import busy
from solvers.fanout import (
    NEVER,
    Candidate,
    Estimate,
    enumerate_candidates,
    node_counts,
    submit_action,
)
from solvers.problem import Problem, job_request
from solvers.sitepolicy.preamble import planning_problem
from specs.actions import Action, Reason, ReasonCode
from specs.desired import DesiredState
from specs.snapshot import Snapshot


@runtime_checkable
class Forecaster(Protocol):
    """An adapter that can estimate when submissions would start (one per action, in order;
    a datetime, ``"never"``, or None when it cannot tell)."""

    def forecast(self, actions: Sequence[Action], *, now: datetime) -> Sequence[Estimate]: ...


_ASKED = Reason(code=ReasonCode.FAN_OUT, message="forecast")


def _signature(c: Candidate) -> tuple[object, ...]:
    """What the cluster is asked: the same for candidates of different workloads alike."""
    return (
        c.cluster,
        c.pool,
        c.partition,
        c.gpu_type,
        c.nodes,
        c.gpus_per_node,
        c.tasks_per_node,
        c.walltime,
        c.time_min,
        c.account,
    )


@dataclass
class ForecastRun:
    """One plan run's forecasts: every identical request asked once."""

    adapters: Mapping[str, Adapter]
    now: datetime
    cache: dict[tuple[object, ...], Estimate] = field(default_factory=dict)

    def estimates(self, pairs: Sequence[tuple[Candidate, Action]]) -> dict[str, Estimate]:
        todo: dict[str, list[tuple[tuple[object, ...], Action]]] = {}
        for c, action in pairs:
            sig = _signature(c)
            if sig not in self.cache and all(sig != s for s, _ in todo.get(c.cluster, [])):
                todo.setdefault(c.cluster, []).append((sig, action))
        for cluster, asks in sorted(todo.items()):
            answers = self._ask(cluster, [a for _, a in asks])
            for (sig, _), answer in zip(asks, answers, strict=True):
                self.cache[sig] = answer
        return {c.key: self.cache.get(_signature(c)) for c, _ in pairs}

    def _ask(self, cluster: str, actions: list[Action]) -> list[Estimate]:
        adapter = self.adapters.get(cluster)
        if not isinstance(adapter, Forecaster):
            return [None] * len(actions)
        try:
            with busy(f"asking cluster {cluster} when {len(actions)} submissions would start"):
                answers = list(adapter.forecast(actions, now=self.now))
        except AdapterError:
            return [None] * len(actions)
        return [_estimate(a) for a in answers] + [None] * (len(actions) - len(answers))


def _estimate(answer: datetime | str | None) -> Estimate:
    if answer == NEVER:
        return NEVER
    if isinstance(answer, datetime):
        return answer if answer.tzinfo else answer.replace(tzinfo=UTC)
    return None


def waiting_candidates(
    desired: DesiredState, snapshot: Snapshot, now: datetime
) -> list[tuple[Candidate, Action]]:
    """Candidates of the fan-out workloads a plan would submit now (no job waiting yet, not
    held back by budget or retry backoff), each with the submit it would be."""
    problem = planning_problem(desired, snapshot, now)
    out: list[tuple[Candidate, Action]] = []
    for key, job in sorted(problem.fan_out.items()):
        if key in problem.candidates or (
            job.blocked is not None and job.blocked.code != ReasonCode.NO_ELIGIBLE_POOL
        ):
            continue
        out += candidates_of(desired, problem, key)
    return out


def candidates_of(
    desired: DesiredState, problem: Problem, key: str
) -> list[tuple[Candidate, Action]]:
    """Every candidate of workload ``key`` (fan-out or not: ``cp cost`` shows them all)."""
    wl = desired.workloads[key]
    job = problem.fan_out.get(key) or job_request(key, wl, desired, problem.pools, problem.now)
    seg = problem.segments.get(key)
    cands = enumerate_candidates(job, wl.spec, problem.pools, node_counts(problem), seg)
    return [(c, submit_action(c, job, wl.spec, _ASKED, seg.number if seg else None)) for c in cands]


def gather(
    desired: DesiredState,
    snapshot: Snapshot,
    adapters: Mapping[str, Adapter],
    now: datetime,
    run: ForecastRun | None = None,
) -> dict[str, Estimate]:
    """Estimates for every candidate a plan would consider now, by ``Candidate.key``."""
    pairs = waiting_candidates(desired, snapshot, now)
    if not pairs:
        return {}
    return (run or ForecastRun(adapters, now)).estimates(pairs)
