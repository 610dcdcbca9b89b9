"""Policy changes act, and reasons tell the truth.

A lowered limit brings the project (or department) down to it in one plan, victims chosen
as reclaim chooses them; non-preemptible work is never said to be reclaimable; a wait
caused by another project's minRuntime names it and says until when.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from adapters.simulator import nodes_from_spec
from controlplane.reconcile import plan
from solvers.kai.disruption import Ledger
from solvers.kai.limits import enforce_limits
from solvers.policy import Policy
from solvers.problem import build_problem
from solvers.session import Session
from specs.snapshot import ClusterState, Job, Replica, Snapshot
from tests.builders import NOW, cluster, department, desired, project, workload

POOLS = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 4, "nodes": 8}]


def world(d: Any, *jobs: Job) -> Snapshot:
    nodes = [n for c in d.clusters.values() for n in nodes_from_spec(c)]
    return Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=list(jobs))])


def running(key: str, node: str, gpus: int = 4, minutes_ago: int = 60, id: str = "") -> Job:
    return Job(
        id=id or key.replace("/", "-"),
        workload=key,
        replicas=[Replica(node=node, gpus=gpus)],
        started_at=NOW - timedelta(minutes=minutes_ago),
        pool="a100",
    )


def test_a_lowered_limit_reclaims_down_to_it() -> None:
    """p holds 28 GPUs (7 jobs of 4) under limit 32; the limit is cut to 16."""
    docs = [
        cluster(pools=POOLS),
        project("p", gpus=8, limit=16),
        *[workload(f"w{i}", "p", gpus=4, priority=10 + i) for i in range(7)],
    ]
    d = desired(docs)
    jobs = [running(f"p/w{i}", f"a100-0{i + 1}") for i in range(7)]
    p = plan(d, world(d, *jobs), now=NOW)
    evicted = sorted(a.workload for a in p.actions if a.op.value == "preempt")
    assert evicted == ["p/w0", "p/w1", "p/w2"]  # the lowest priorities first
    assert all(a.reason.code.value == "reclaim" for a in p.actions)
    assert "limit" in p.actions[0].reason.message and "16" in p.actions[0].reason.message
    assert p.projects["p"].allocated == 16


def test_a_lowered_limit_takes_back_no_more_jobs_than_it_needs() -> None:
    """p holds 21 GPUs: two small jobs first in victim order, then a big one (all started
    together); its limit is cut to 12. The small ones were taken, then the big one, and the small
    ones restarted elsewhere ("moved"), for nothing: the big one alone brings p down to
    its limit (user trial, the quick start's nlp). Each job taken is needed."""
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 4}]
    docs = [
        cluster(pools=pools),
        project("p", gpus=12, limit=12),
        workload("big", "p", gpus=8, replicas=2),
        workload("s1", "p", gpus=2),
        workload("s2", "p", gpus=2),
        workload("nb", "p", gpus=1, type="interactive"),
    ]
    d = desired(docs)
    nodes = [n for c in d.clusters.values() for n in nodes_from_spec(c)]
    big = Job(
        id="big",
        workload="p/big",
        replicas=[Replica(node="a100-01", gpus=8), Replica(node="a100-02", gpus=8)],
        started_at=NOW - timedelta(hours=2),
        pool="a100",
    )
    jobs = [
        big,
        running("p/s1", "a100-03", gpus=2, minutes_ago=120),
        running("p/s2", "a100-03", gpus=2, minutes_ago=120),
        running("p/nb", "a100-04", gpus=1, minutes_ago=120),
    ]
    snap = Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=jobs)])
    ledger = Ledger()
    enforce_limits(Session.open(build_problem(d, snap, NOW)), ledger)
    assert sorted(ledger.disrupted) == ["p/big"]
    p = plan(d, snap, now=NOW)
    assert [(a.op.value, a.workload) for a in p.actions] == [("preempt", "p/big")]
    assert p.projects["p"].allocated == 5


def test_a_lowered_department_limit_reclaims_down_to_it() -> None:
    docs = [
        cluster(pools=POOLS),
        department("d", gpus=8, limit=8),
        project("x", gpus=4, department="d"),
        project("y", gpus=4, department="d"),
        *[workload(f"x{i}", "x", gpus=4) for i in range(2)],
        *[workload(f"y{i}", "y", gpus=4) for i in range(2)],
    ]
    d = desired(docs)
    jobs = [running(f"x/x{i}", f"a100-0{i + 1}") for i in range(2)] + [
        running(f"y/y{i}", f"a100-0{i + 3}") for i in range(2)
    ]
    p = plan(d, world(d, *jobs), now=NOW)
    assert sum(a.op.value == "preempt" for a in p.actions) == 2
    assert p.departments["d"].allocated == 8


def test_non_preemptible_work_is_never_said_to_be_reclaimable() -> None:
    """p's preemptible training already holds its deserved 8; the interactive session
    (non-preemptible) still fits within deserved for non-preemptible work."""
    d = desired(
        [
            cluster(pools=POOLS),
            project("p", gpus=8),
            workload("train", "p", gpus=4, replicas=2),
            workload("notebook", "p", gpus=4, type="interactive"),
        ]
    )
    jobs = [
        Job(
            id="1",
            workload="p/train",
            replicas=[Replica(node="a100-01", gpus=4), Replica(node="a100-02", gpus=4)],
            started_at=NOW - timedelta(hours=1),
            pool="a100",
        )
    ]
    p = plan(d, world(d, *jobs), now=NOW)
    [start] = p.actions
    assert start.workload == "p/notebook"
    assert "may be reclaimed" not in start.reason.message
    assert start.reason.code.value == "within-deserved"
    assert "non-preemptible work holds 4 of its deserved 8" in start.reason.message
    assert "never reclaimed or preempted" in start.reason.message


@pytest.mark.parametrize("engine", ["kai", "best"])
def test_work_that_asks_for_no_gpus_is_not_said_to_use_gpus(engine: str) -> None:
    """p runs 12 GPUs, far above its deserved 4; CPU-only jobs (gpus: 0) start beside
    them. They take no GPU and nothing of p's quota: their reasons say so, not that they
    run above deserved on idle GPUs and may be reclaimed (both engines; one is elastic)."""
    d = desired(
        [
            cluster(pools=POOLS),
            project("p", gpus=4),
            project("q", gpus=28),
            workload("train", "p", gpus=4, replicas=3),
            workload("prep", "p", gpus=0),
            workload("etl", "p", gpus=0, replicas=2, minReplicas=1),
        ]
    )
    train = Job(
        id="1",
        workload="p/train",
        replicas=[Replica(node=f"a100-0{i}", gpus=4) for i in (1, 2, 3)],
        started_at=NOW - timedelta(hours=1),
        pool="a100",
    )
    p = plan(d, world(d, train), now=NOW, policy=Policy(engine=engine))
    started = {a.workload: a.reason for a in p.actions if a.op.value == "submit"}
    assert sorted(started) == ["p/etl", "p/prep"]
    for reason in started.values():
        assert reason.code.value == "within-deserved", reason
        assert reason.message == (
            "CPU only: asks for no GPUs, so nothing counts against project p's GPU quota"
        )


def test_a_wait_on_min_runtime_names_it() -> None:
    """q is owed its deserved GPUs, but p's over-quota jobs started 10 minutes ago and p
    protects its work for an hour."""
    d = desired(
        [
            cluster(pools=POOLS),
            project("p", gpus=0, minRuntime="1h"),
            project("q", gpus=8),
            *[workload(f"p{i}", "p", gpus=4) for i in range(8)],
            workload("need", "q", gpus=4),
        ]
    )
    jobs = [running(f"p/p{i}", f"a100-0{i + 1}", minutes_ago=10) for i in range(8)]
    p = plan(d, world(d, *jobs), now=NOW)
    assert p.actions == []
    [waits] = p.pending
    assert waits.workload == "q/need"
    assert waits.reason.code.value == "min-runtime"
    assert "project p" in waits.reason.message and "minRuntime 1h" in waits.reason.message
    assert "10:50" in waits.reason.message  # the first of them may be reclaimed then


def test_a_wait_at_a_limit_that_only_min_runtime_keeps_names_it() -> None:
    """p holds 12 of its limit of 16; p/critical (8 GPUs) may take the room of p's
    lower-priority work, all of it within minRuntime. It waited "over-limit: needs 8
    GPUs; project p holds 12 of its limit of 16", and two minutes later, on the same
    world, preempted and started (user trial on Slurm)."""
    d = desired(
        [
            cluster(pools=POOLS),
            project("p", gpus=8, limit=16, minRuntime="3m"),
            *[workload(f"low{i}", "p", gpus=4, priority=50) for i in range(3)],
            workload("critical", "p", gpus=4, replicas=2, priority=99),
        ]
    )
    jobs = [running(f"p/low{i}", f"a100-0{i + 1}", minutes_ago=1) for i in range(3)]
    p = plan(d, world(d, *jobs), now=NOW)
    assert p.actions == []
    [waits] = p.pending
    assert waits.workload == "p/critical"
    assert waits.reason.code.value == "min-runtime", waits.reason.message
    assert "project p (minRuntime 3m" in waits.reason.message
    assert "10:02" in waits.reason.message  # the first of them may be taken then
    later = plan(d, world(d, *jobs), now=NOW + timedelta(minutes=2, seconds=1))
    assert {a.workload for a in later.actions} >= {"p/critical"}


def test_a_wait_on_min_runtime_in_its_own_project_names_it_beyond_fair_share() -> None:
    """p (deserved 8) holds all 32 GPUs, above its fair share; p/hi (priority 200) outranks
    p's work, all of it inside minRuntime. It waited `no-capacity: ... above its fair share:
    GPUs are reclaimed only for work within fair share`, though preemption inside its own
    project (not reclaim) would start it once the protection ends (user trial)."""
    d = desired(
        [
            cluster(pools=POOLS),
            project("p", gpus=8, minRuntime="30m"),
            project("q", gpus=24),
            *[workload(f"low{i}", "p", gpus=4, priority=50) for i in range(8)],
            workload("hi", "p", gpus=4, priority=200),
        ]
    )
    jobs = [running(f"p/low{i}", f"a100-0{i + 1}", minutes_ago=10) for i in range(8)]
    p = plan(d, world(d, *jobs), now=NOW)
    assert p.actions == []
    [waits] = p.pending
    assert waits.workload == "p/hi"
    assert waits.reason.code.value == "min-runtime", waits.reason.message
    assert "project p (minRuntime 30m" in waits.reason.message
    later = plan(d, world(d, *jobs), now=NOW + timedelta(minutes=21))
    preempted = [a.workload for a in later.actions if a.op.value == "preempt"]
    assert preempted and all(w.startswith("p/low") for w in preempted), preempted


def test_one_gpu_of_non_preemptible_work_is_one_gpu() -> None:
    """Above their limit read "(1 GPUs)" (user trial)."""
    from solvers.problem import Queue
    from solvers.reasons.disturbed import above_limit

    q = Queue(id="project:p", name="p", kind="project", parent=None, deserved=1, weight=1.0,
              limit=1, priority=0)  # fmt: skip
    assert "work (1 GPU) is never" in above_limit(q, 2, [], 1)
    assert "work (2 GPUs) is never" in above_limit(q, 3, [], 2)
