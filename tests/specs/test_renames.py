"""What the clusters and the store know under a renamed project's old name is read as the
new one's (specs/renames.py); the end to end story is tests/controlplane/test_rename_project.py."""

from __future__ import annotations

from datetime import timedelta

from specs.models import WorkloadSpec
from specs.renames import carried_over
from specs.snapshot import (
    ClusterState,
    Failure,
    Job,
    Node,
    QueueEntry,
    Replica,
    Snapshot,
    UsageRecord,
)
from tests.builders import NOW, cluster, project, workload
from tests.builders.state import desired

SPECS = desired(
    [
        cluster(),
        project("cv", gpus=8, renamedFrom=["vision"]),
        project("nlp", gpus=8),
        workload("train", "cv", gpus=4, walltime="3d"),  # as it ran
        workload("tune", "cv", gpus=2, walltime="3d"),  # edited: 1 GPU when it ran
        workload("chat", "nlp", gpus=1),
    ]
)


def _ran(gpus: int) -> WorkloadSpec:
    return WorkloadSpec(project="vision", gpus=gpus, walltime=3 * 86400)


def _snapshot() -> Snapshot:
    ran = {"train": _ran(4), "tune": _ran(1)}
    jobs = [
        Job(
            id=str(i),
            workload=f"vision/{name}",
            spec_digest=spec.digest,
            replicas=[Replica(node="a100-0", gpus=spec.gpus)],
        )
        for i, (name, spec) in enumerate(ran.items())
    ]
    jobs.append(Job(id="9", workload="nlp/chat", replicas=[Replica(node="a100-1", gpus=1)]))
    hour = timedelta(hours=1)
    return Snapshot(
        now=NOW,
        clusters=[
            ClusterState(
                name="sim", nodes=[Node(name=f"a100-{i}", gpus=8) for i in range(2)], jobs=jobs
            )
        ],
        queue=[QueueEntry(workload="vision/later", since=NOW - hour)],
        usage=[
            UsageRecord(project="vision", gpu_hours=40, ended_at=NOW),
            UsageRecord(project="nlp", gpu_hours=3, ended_at=NOW),
        ],
        failures=[
            Failure(
                workload="vision/train",
                count=2,
                job="0",
                ended_at=NOW - hour,
                spec_digest=ran["train"].digest,
            )
        ],
        versions={spec.digest: spec for spec in ran.values()},
    )


def test_the_old_name_s_jobs_usage_queue_and_failures_are_the_new_one_s() -> None:
    before = _snapshot()
    after = carried_over(SPECS, before)
    jobs = {j.id: j for j in after.clusters[0].jobs}
    assert [(j.workload, j.tagged_as) for j in jobs.values()] == [
        ("cv/train", "vision/train"),
        ("cv/tune", "vision/tune"),
        ("nlp/chat", None),
    ]
    train, tune = SPECS.workloads["cv/train"].spec, SPECS.workloads["cv/tune"].spec
    # unchanged but for the project: the same version; edited since: the old one, renamed
    assert jobs["0"].spec_digest == train.digest
    assert jobs["1"].spec_digest != tune.digest
    assert after.versions[jobs["1"].spec_digest or ""].project == "cv"
    assert after.versions[jobs["1"].spec_digest or ""].gpus == 1
    assert [(f.workload, f.spec_digest) for f in after.failures] == [("cv/train", train.digest)]
    assert [q.workload for q in after.queue] == ["cv/later"]
    assert [(u.project, u.gpu_hours) for u in after.usage] == [("cv", 40), ("nlp", 3)]
    assert before == _snapshot(), "the snapshot given is left as it was"


def test_a_snapshot_no_rename_touches_is_returned_as_it_is() -> None:
    snap = _snapshot()
    snap.clusters[0].jobs = snap.clusters[0].jobs[2:]
    snap.queue, snap.usage, snap.failures = [], snap.usage[1:], []
    assert carried_over(SPECS, snap) is snap
