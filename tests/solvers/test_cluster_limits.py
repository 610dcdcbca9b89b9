"""Limits a cluster sets on its pools beyond the specs: a Slurm partition's MaxTime.

Slurm takes a job asking for more than its partition's MaxTime and keeps it pending for
ever (PartitionTimeLimit); the specs cannot know the limit, so the snapshot carries it
(``pools[].maxWalltime``) and a plan treats it as the pool's maxWalltime.
"""

from __future__ import annotations

from typing import Any

from adapters.simulator import nodes_from_spec
from controlplane.reconcile import plan
from solvers.fanout import enumerate_candidates, node_counts
from solvers.problem import ProblemCache, build_problem
from specs.actions import Op, ReasonCode
from specs.desired import DesiredState
from specs.observation import observed_digest
from specs.snapshot import ClusterState, Job, PoolState, Replica, Snapshot
from tests.builders import NOW, cluster, desired, pool, project, workload

POOLS = [
    pool("a100", partition="gpu-a100"),
    pool("v100", gpu_type="v100", gpus_per_node=4, nodes=2, partition="gpu-v100"),
]


def specs(*workloads: dict[str, Any], v100_limit: str | None = None) -> DesiredState:
    pools = [dict(p) for p in POOLS]
    if v100_limit is not None:
        pools[1]["maxWalltime"] = v100_limit
    return desired([cluster(pools=pools, adapter="slurm"), project("p", gpus=16), *workloads])


def world(d: DesiredState, *jobs: Job, v100_max: int | None = None) -> Snapshot:
    nodes = [n for c in d.clusters.values() for n in nodes_from_spec(c)]
    limits = [] if v100_max is None else [PoolState(name="v100", max_walltime=v100_max)]
    state = ClusterState(name="sim", nodes=nodes, jobs=list(jobs), pools=limits)
    return Snapshot(now=NOW, clusters=[state])


def test_work_longer_than_every_partition_that_could_take_it_waits_and_says_why() -> None:
    d = specs(workload("long", "p", gpus=2, walltime="1h", gpuTypes=["v100"]))
    made = plan(d, world(d, v100_max=600), now=NOW)
    assert made.actions == []
    (waiting,) = made.pending
    assert waiting.reason.code is ReasonCode.WALLTIME_EXCEEDS_LIMIT
    assert "walltime 1h" in waiting.reason.message
    assert "sim/v100 (partition gpu-v100) 10m" in waiting.reason.message
    # without the cluster's limit it is placed: the limit is what holds it back
    assert [a.op for a in plan(d, world(d), now=NOW).actions] == [Op.SUBMIT]


def test_work_that_may_use_another_pool_goes_where_its_walltime_is_allowed() -> None:
    d = specs(workload("any", "p", gpus=4, walltime="1h"))
    free = {  # by cost alone v100 is cheaper: without the limit it goes there
        a.pool for a in plan(d, world(d), now=NOW).actions
    }
    assert free == {"v100"}
    limited = plan(d, world(d, v100_max=1800), now=NOW)
    assert [(a.op, a.pool) for a in limited.actions] == [(Op.SUBMIT, "a100")]


def test_the_shorter_of_the_specs_and_the_clusters_limit_counts() -> None:
    d = specs(v100_limit="20m")
    for seen, limit in ((None, 1200), (600, 600), (3600, 1200)):
        problem = build_problem(d, world(d, v100_max=seen), NOW)
        pool = problem.pools[("sim", "v100")]
        assert (pool.max_walltime, pool.cluster_max_walltime) == (limit, seen)


def test_running_work_is_left_alone_when_the_limit_is_lowered_under_it() -> None:
    """Slurm applies MaxTime when a job starts: one already running runs on, where it
    could go nowhere else and where another pool would allow it."""
    for where in (["v100"], None):
        d = specs(workload("long", "p", gpus=2, walltime="1h", gpuTypes=where))
        running = Job(
            id="7",
            workload="p/long",
            pool="v100",
            started_at=NOW,
            walltime=3600,
            replicas=[Replica(node="v100-01", gpus=2)],
            spec_digest=d.workloads["p/long"].spec.digest,
        )
        made = plan(d, world(d, running, v100_max=600), now=NOW)
        assert made.actions == [] and made.pending == []


def test_the_problem_cache_keys_on_the_clusters_limits() -> None:
    d = specs(workload("long", "p", gpus=2, walltime="1h", gpuTypes=["v100"]))
    cache = ProblemCache()
    blocked = build_problem(d, world(d, v100_max=600), NOW, cache).jobs["p/long"]
    assert blocked.blocked is not None and blocked.pools == []
    raised = build_problem(d, world(d, v100_max=7200), NOW, cache).jobs["p/long"]
    assert raised.blocked is None and raised.pools == [("sim", "v100")]


def test_fan_out_candidates_keep_within_the_clusters_limit() -> None:
    """A fan-out workload runs on v100 only in checkpoint segments that fit its MaxTime."""
    fan = {"fanOut": True, "maxParallel": 4}
    d = specs(
        workload("plain", "p", gpus=4, walltime="1h", strategy=fan),
        workload(
            "seg",
            "p",
            gpus=4,
            walltime="1h",
            strategy=fan,
            checkpoint={"signal": "USR1", "grace": "1m", "total": "3h"},
        ),
    )
    problem = build_problem(d, world(d, v100_max=1800), NOW)

    def modes(key: str) -> set[tuple[str, str, int | None]]:
        found = enumerate_candidates(
            problem.jobs[key],
            d.workloads[key].spec,
            problem.pools,
            node_counts(problem),
            problem.segments.get(key),
        )
        return {(c.pool, c.mode.value, c.walltime) for c in found}

    assert {pool for pool, _, _ in modes("p/plain")} == {"a100"}
    assert ("v100", "checkpoint", 1800) in modes("p/seg")
    assert all(walltime <= 1800 for pool, _, walltime in modes("p/seg") if pool == "v100")


def test_a_changed_limit_makes_a_plan_stale() -> None:
    """A plan submits what the limit allowed when it was made: another limit, another
    state of the clusters (a reviewed plan is refused, and planned again)."""
    d = specs()
    digests = {observed_digest(world(d, v100_max=limit)) for limit in (None, 600, 1200)}
    assert len(digests) == 3
