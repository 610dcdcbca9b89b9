"""Two running jobs of one workload that is not fan-out: an apply stopped between a
replacement's submit and its cancel (a resize or a move on Slurm, which start the new
shape as a new job; an edit's new version).

From a user trial on real Slurm (cp apply killed inside a resize): the next plan kept the
old job, cancelled the new one, which already ran the shape the specs ask, and resized
again: a third job, the workload restarted twice. The replacement is the job to keep.
"""

from __future__ import annotations

from datetime import timedelta

from controlplane.reconcile import plan
from specs.actions import Op
from specs.snapshot import ClusterState, Job, Node, Replica, Snapshot
from tests.builders import NOW, cluster, desired, project, workload

POOLS = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]


def _job(job_id: str, digest: str, ago: timedelta, nodes: list[str]) -> Job:
    return Job(
        id=job_id,
        workload="p/w",
        submitted_at=NOW - ago,
        started_at=NOW - ago,
        replicas=[Replica(node=n, gpus=4) for n in nodes],
        pool="a100",
        spec_digest=digest,
    )


def _world(*jobs: Job) -> Snapshot:
    nodes = [Node(name=f"a100-0{i}", pool="a100", gpu_type="a100_80", gpus=8) for i in (1, 2)]
    return Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=list(jobs))])


def test_the_replacement_stays_and_the_old_job_is_cancelled() -> None:
    d = desired(
        [cluster(pools=POOLS), project("p", gpus=16), workload("w", "p", gpus=4, replicas=2)]
    )
    now_spec = d.workloads["p/w"].spec
    old = now_spec.model_copy(update={"replicas": 1})  # the version the old job ran
    world = _world(
        _job("7", old.digest, timedelta(hours=2), ["a100-01"]),
        _job("9", now_spec.digest, timedelta(minutes=1), ["a100-01", "a100-02"]),
    )
    world.versions = {old.digest: old}
    made = plan(d, world, now=NOW)
    assert [(a.op, a.job) for a in made.actions] == [(Op.CANCEL, "7")]
    message = made.actions[0].reason.message
    assert "job 9 on sim of p/w" in message and "one job per workload" in message, message


def test_of_two_jobs_of_one_version_the_newer_stays() -> None:
    """A grow or a move by replacement: both jobs run the same spec; the plan that made
    the newer one meant to cancel the older."""
    d = desired(
        [
            cluster(pools=POOLS),
            project("p", gpus=16),
            workload("w", "p", gpus=4, replicas=2, minReplicas=1),
        ]
    )
    digest = d.workloads["p/w"].spec.digest
    world = _world(
        _job("7", digest, timedelta(hours=2), ["a100-01"]),
        _job("9", digest, timedelta(minutes=1), ["a100-01", "a100-02"]),
    )
    made = plan(d, world, now=NOW)
    assert [(a.op, a.job) for a in made.actions] == [(Op.CANCEL, "7")]
