"""The placeholder verdicts (controlplane/placeholders.py), one case per fate, no cluster."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from controlplane.placeholders import Fate, inject, judge
from specs.snapshot import ClusterState, Job, JobState, Replica, Snapshot
from tests.builders import NOW, cluster, pool, project, workload
from tests.builders.cli import cp, write_specs


@dataclass
class Ph:
    workload: str = "p/w"
    cluster: str = "c"
    job: str = "7"
    plan_id: str = "plan"
    submitted_at: datetime = NOW - timedelta(seconds=30)


def snap(*jobs: Job, cluster: str = "c") -> Snapshot:
    return Snapshot(now=NOW, clusters=[ClusterState(name=cluster, jobs=list(jobs))])


def job(state: JobState, *, workload: str = "p/w", started: bool = False, id: str = "7") -> Job:
    return Job(
        id=id,
        workload=workload,
        state=state,
        started_at=NOW - timedelta(seconds=5) if started else None,
        replicas=[Replica(node="n1" if started else None, gpus=1)],
    )


@pytest.mark.parametrize(
    ("seen", "age", "fate"),
    [
        (job(JobState.PENDING), 30, Fate.WAITING),
        (job(JobState.REQUEUED), 30, Fate.WAITING),
        (job(JobState.RUNNING, started=True), 30, Fate.STARTED),
        (job(JobState.COMPLETED, started=True), 30, Fate.STARTED),  # ran and ended: a normal job
        (job(JobState.CANCELLED), 30, Fate.DIED),  # ended without a start
        (job(JobState.FAILED), 30, Fate.DIED),
        (job(JobState.RUNNING, workload="other/job", started=True), 30, Fate.VANISHED),  # id reused
        (None, 30, Fate.LAGGING),
        (None, 121, Fate.VANISHED),  # Slurm forgot it, or it never existed
    ],
)
def test_fates(seen: Job | None, age: int, fate: Fate) -> None:
    ph = Ph(submitted_at=NOW - timedelta(seconds=age))
    snapshot = snap(seen) if seen else snap()
    [verdict] = judge([ph], snapshot)
    assert verdict.fate is fate
    assert verdict.fate.live == (fate in (Fate.WAITING, Fate.LAGGING))


def test_an_unobserved_cluster_keeps_its_placeholders() -> None:
    [verdict] = judge([Ph()], snap(cluster="elsewhere"))
    assert verdict.fate is Fate.UNOBSERVED and verdict.fate.live


def test_lagging_placeholders_are_injected_as_pending_jobs() -> None:
    before = snap()
    after = inject(before, judge([Ph(submitted_at=NOW.replace(tzinfo=None))], before))
    [injected] = after.clusters[0].jobs
    assert (injected.id, injected.workload, injected.state) == ("7", "p/w", JobState.PENDING)
    assert injected.submitted_at is not None and injected.submitted_at.tzinfo is not None
    assert before.clusters[0].jobs == [], "the input snapshot is not changed"


def test_no_injection_when_the_workload_already_has_an_active_job() -> None:
    # the old job of a move still winds down while the new one is not visible yet
    before = snap(job(JobState.COMPLETING, id="6", started=True))
    after = inject(before, judge([Ph(job="7")], before))
    assert [j.id for j in after.clusters[0].jobs] == ["6"]


def test_a_cancelled_placeholder_is_not_cancelled_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A never-started job (a fan-out candidate waiting in the cluster's queue) cancelled
    because its workload left the specs: its placeholder stayed, was injected as waiting
    again, and for two minutes every plan and apply cancelled it again (user trial)."""
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1}]
    base = [cluster(pools=pools), project("p", gpus=8), workload("hog", "p", gpus=8)]
    fan = workload("fan", "p", gpus=8, walltime="1h", strategy={"fanOut": True})
    specs = write_specs(tmp_path / "s", [*base, fan])
    now = ["--now", "2026-11-30T00:00:00Z"]
    assert cp(capsys, "apply", specs, "--auto-approve", *now).code == 0
    jobs = cp(capsys, "get", "jobs", specs, "-o", "json").json()["items"]
    assert [j["state"] for j in jobs if j["workload"] == "p/fan"] == ["PENDING"]
    write_specs(specs, base)
    applied = cp(capsys, "apply", specs, "--auto-approve", "--json", *now).json()
    assert [(a["op"], a["workload"]) for a in applied["actions"]] == [("cancel", "p/fan")]
    again = cp(capsys, "plan", specs, "--json", "--detailed-exitcode", *now)
    assert again.code == 0 and again.json()["actions"] == [], again.out


def test_two_candidates_on_one_cluster_are_two_placeholders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store kept one placeholder per workload and cluster: of two fan-out candidates
    submitted on one cluster only the second was remembered. With the first not shown yet
    (observation lag) and the second cancelled before it started, the plan submitted the
    first one's candidate again (user trial)."""
    pools = [pool("a100", nodes=1), pool("v100", gpu_type="v100", gpus_per_node=4, nodes=1)]
    busy = [
        cluster(pools=pools),
        project("p", gpus=12),
        project("q", gpus=12),
        workload("ba", "q", gpus=8, nodePools=["a100"], walltime="2h"),
        workload("bv", "q", gpus=4, nodePools=["v100"], walltime="2h"),
    ]
    specs = write_specs(tmp_path / "s", busy)
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-11-01T00:00:00Z").code == 0
    fan = {"fanOut": True, "maxParallel": 2}
    write_specs(specs, [*busy, workload("fan", "p", gpus=4, walltime="6h", strategy=fan)])
    at = ["--now", "2026-11-01T00:10:00Z"]
    applied = cp(capsys, "apply", specs, "--auto-approve", "--json", *at).json()
    first, second = [a["job"] for a in applied["actions"] if a["workload"] == "p/fan"]

    state = specs / ".cp" / "simulator" / "sim.json"
    saved = json.loads(state.read_text())
    jobs = [j for j in saved["state"]["jobs"] if j["id"] != first]  # not shown yet
    for j in jobs:
        if j["id"] == second:  # cancelled by hand before it started
            j["state"], j["endedAt"] = "CANCELLED", "2026-11-01T00:10:30Z"
    saved["state"]["jobs"] = jobs
    state.write_text(json.dumps(saved))
    plan = cp(capsys, "plan", specs, "--json", "--now", "2026-11-01T00:11:00Z").json()
    assert plan["actions"] == [], "the lagging candidate is not submitted again"
    assert [(p["workload"], p["reason"]["code"]) for p in plan["pending"]] == [
        ("p/fan", "submitted")
    ]
