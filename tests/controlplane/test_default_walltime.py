"""A workload that asks no walltime runs under the limits that apply to it.

Slurm gives a job submitted without ``--time`` a time limit all the same: its
partition's, capped by its association's MaxWall. A project's ``maxWalltime`` and a
pool's are site policy: a workload that leaves out ``walltime`` must not run for ever
past them (on the simulator and Kubernetes nothing else would stop it).
"""

from __future__ import annotations

from typing import Any

from adapters.simulator import nodes_from_spec
from controlplane.reconcile import plan
from solvers.fanout import enumerate_candidates, node_counts
from solvers.problem import build_problem
from specs.actions import Op
from specs.desired import DesiredState
from specs.snapshot import ClusterState, PoolState, Snapshot
from tests.builders import NOW, cluster, desired, pool, project, workload

DAY = 86400


def specs(*workloads: dict[str, Any], **project_spec: Any) -> DesiredState:
    pools = [pool("a100", nodes=1, maxWalltime="2d")]
    return desired([cluster(pools=pools), project("p", gpus=8, **project_spec), *workloads])


def world(d: DesiredState, *, cluster_max: int | None = None) -> Snapshot:
    nodes = [n for c in d.clusters.values() for n in nodes_from_spec(c)]
    limits = [] if cluster_max is None else [PoolState(name="a100", max_walltime=cluster_max)]
    return Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, pools=limits)])


def submitted_walltime(d: DesiredState, snapshot: Snapshot | None = None) -> int | None:
    (action,) = plan(d, snapshot or world(d), now=NOW).actions
    assert action.op is Op.SUBMIT and action.submit is not None
    return action.submit.walltime


def test_no_walltime_runs_at_most_its_projects_max_walltime() -> None:
    d = specs(workload("w", "p", gpus=4), maxWalltime="1d")
    assert submitted_walltime(d) == DAY


def test_no_walltime_runs_at_most_its_pools_max_walltime() -> None:
    # the pool's 2d is shorter than the project's 3d; without a project limit, the pool's
    assert submitted_walltime(specs(workload("w", "p", gpus=4), maxWalltime="3d")) == 2 * DAY
    assert submitted_walltime(specs(workload("w", "p", gpus=4))) == 2 * DAY


def test_the_clusters_own_limit_counts_too() -> None:
    d = specs(workload("w", "p", gpus=4), maxWalltime="1d")
    assert submitted_walltime(d, world(d, cluster_max=3600)) == 3600


def test_a_walltime_asked_for_is_kept() -> None:
    d = specs(workload("w", "p", gpus=4, walltime="5h"), maxWalltime="1d")
    assert submitted_walltime(d) == 5 * 3600


def test_no_limit_anywhere_leaves_it_unbounded() -> None:
    d = desired([cluster(pools=[pool("a100", nodes=1)]), project("p"), workload("w", "p")])
    assert submitted_walltime(d) is None


def test_a_fan_out_candidate_gets_the_limit_as_its_time() -> None:
    d = specs(
        workload("w", "p", gpus=4, strategy={"fanOut": True, "maxParallel": 2}),
        maxWalltime="1d",
    )
    problem = build_problem(d, world(d), NOW)
    candidates = enumerate_candidates(
        problem.jobs["p/w"], d.workloads["p/w"].spec, problem.pools, node_counts(problem), None
    )
    assert candidates
    assert {c.walltime for c in candidates} == {DAY}
