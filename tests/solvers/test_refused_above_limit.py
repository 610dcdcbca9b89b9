"""A queue kept above its limit because the cluster refused to evict its jobs lately says
so: its ``aboveLimit`` named minRuntime and non-preemptible work only, and read "nothing
it runs may be taken back now" of work the eviction backoff kept (closing note, issue 10).
"""

from __future__ import annotations

from datetime import timedelta

from controlplane.reconcile import plan
from specs.snapshot import ClusterState, Job, JobState, Node, Replica, Snapshot
from tests.builders import NOW, cluster, desired, project, workload
from tests.builders.incidents import refusal

POOLS = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1}]


def _running(job_id: str, name: str, d: object) -> Job:
    return Job(
        id=job_id,
        workload=f"a/{name}",
        state=JobState.RUNNING,
        replicas=[Replica(node="a100-01", gpus=4)],
        started_at=NOW - timedelta(hours=1),
        submitted_at=NOW - timedelta(hours=1),
        plan_id="abc",
        pool="a100",
        spec_digest=d.workloads[f"a/{name}"].spec.digest,  # type: ignore[attr-defined]
    )


def test_a_queue_above_its_limit_names_the_jobs_the_cluster_refused_to_evict() -> None:
    d = desired(
        [
            cluster(pools=POOLS),
            project("a", gpus=0, limit=4),
            workload("one", "a", gpus=4),
            workload("two", "a", gpus=4),
        ]
    )
    jobs = [_running("7", "one", d), _running("8", "two", d)]
    node = Node(name="a100-01", pool="a100", gpu_type="a100_80", gpus=8)

    def snapshot(*refused: str) -> Snapshot:
        return Snapshot(
            now=NOW,
            clusters=[ClusterState(name="sim", nodes=[node], jobs=jobs)],
            refusals=[
                refusal(j, NOW - timedelta(seconds=30), op="preempt", count=2) for j in refused
            ],
        )

    assert len([a for a in plan(d, snapshot(), now=NOW).actions if a.op.evicts]) == 1
    made = plan(d, snapshot("7", "8"), now=NOW)  # type: ignore[arg-type]
    assert made.actions == []
    why = made.projects["a"].above_limit or ""
    assert why.startswith("project a holds 8 GPUs, above its limit of 4: "), why
    assert "nothing it runs may be taken back now" not in why
    assert (
        "the cluster refused to evict a/one (job 7) and a/two (job 8) lately: "
        "tried again after 2026-11-22T10:01:30Z at the earliest"
    ) in why, why
