"""A Cluster removed from the specs while our jobs run there. Nothing can reach it any more
(its adapter settings went with it), so it was simply not observed: its workloads looked
never started and ran a second time on another cluster, their GPUs counted nowhere, and
nothing was said (user trial, high). The store knows what runs there: it is held, as on a
cluster that does not answer, until the Cluster is back or the store is told to forget it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.simulator import nodes_from_spec
from controlplane.reconcile import plan
from controlplane.store import Store
from specs.snapshot import ClusterState, Job, JobRun, Replica, Snapshot
from tests.builders import cluster, desired, pool, project, workload
from tests.builders.cli import cp, write_specs

Capsys = pytest.CaptureFixture[str]
T0 = datetime(2026, 11, 2, tzinfo=UTC)


def _at(hours: float) -> str:
    return (T0 + timedelta(hours=hours)).isoformat()


def _docs(*, west: bool) -> list[dict[str, Any]]:
    pinned = {"clusters": ["west"]} if west else {}
    return [
        cluster("east", pools=[pool(nodes=1)]),
        *([cluster("west", pools=[pool(nodes=1)])] if west else []),
        project("nlp", gpus=16),
        workload("w1", "nlp", gpus=4, walltime="1d", **pinned),
    ]


def test_work_on_a_removed_cluster_is_held_until_the_store_forgets_the_cluster(
    tmp_path: Path, capsys: Capsys
) -> None:
    specs = write_specs(tmp_path / "s", _docs(west=True))
    for hours in (0, 0.5):  # w1 starts on west, and is seen running there
        done = cp(capsys, "apply", specs, "--auto-approve", "--now", _at(hours))
        assert done.code == 0, done.out + done.err
    write_specs(specs, _docs(west=False))  # west leaves the specs while w1 runs there

    plan = cp(capsys, "plan", specs, "--json", "--now", _at(1)).json()
    assert plan["actions"] == [], "no second copy of nlp/w1"
    assert [(p["workload"], p["reason"]["code"]) for p in plan["pending"]] == [
        ("nlp/w1", "cluster-unreachable")
    ]
    assert "no longer in the specs" in plan["unreachable"]["west"]
    assert "cp store forget-cluster west" in plan["unreachable"]["west"]
    assert plan["projects"]["nlp"]["allocated"] == 4  # its GPUs count

    forgot = cp(capsys, "store", "forget-cluster", "west", "--dir", specs, "--json")
    assert forgot.code == 0, forgot.out + forgot.err
    assert forgot.json() == {"cluster": "west", "runs": 1, "placeholders": 0}
    plan = cp(capsys, "plan", specs, "--json", "--now", _at(1)).json()
    assert [(a["op"], a["workload"], a["cluster"]) for a in plan["actions"]] == [
        ("submit", "nlp/w1", "east")
    ]
    assert "unreachable" not in plan


def test_a_cluster_in_the_specs_or_unknown_is_not_forgotten(tmp_path: Path, capsys: Capsys) -> None:
    specs = write_specs(tmp_path / "s", _docs(west=True))
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", _at(0)).code == 0
    refused = cp(capsys, "store", "forget-cluster", "west", "--dir", specs)
    assert refused.code == 1
    assert "west is in the specs" in refused.err
    write_specs(specs, _docs(west=False))
    typo = cp(capsys, "store", "forget-cluster", "wset", "--dir", specs)  # said done (trial)
    assert typo.code == 1
    assert "no work of ours on a cluster 'wset'" in typo.err and "some on west" in typo.err


def test_a_cluster_retired_as_the_readme_says_leaves_nothing_held(
    tmp_path: Path, capsys: Capsys
) -> None:
    """Its workloads removed first (the apply cancels their jobs there), then the Cluster:
    the store still had the cancelled job's run open (only an observation would have seen
    it end, and none could any more), so the next plans held it for ever and cp watch
    --once failed every cycle (user trial, high)."""
    specs = write_specs(tmp_path / "s", _docs(west=True))
    for hours in (0, 0.5):
        assert cp(capsys, "apply", specs, "--auto-approve", "--now", _at(hours)).code == 0
    docs = _docs(west=True)
    write_specs(specs, docs[:-1])  # w1 leaves the specs: cancelled on west
    done = cp(capsys, "apply", specs, "--auto-approve", "--json", "--now", _at(1)).json()
    assert [(a["op"], a["status"]) for a in done["actions"]] == [("cancel", "done")]
    write_specs(specs, [d for d in docs[:-1] if d["metadata"]["name"] != "west"])
    plan = cp(capsys, "plan", specs, "--json", "--now", _at(2)).json()
    assert "unreachable" not in plan and plan["pending"] == [] and plan["actions"] == []
    usage = cp(capsys, "usage", specs, "--json", "--now", _at(2)).json()
    assert usage["projects"]["nlp"]["monthGpuHours"] == pytest.approx(4.0, abs=0.01)  # 4 GPUs 1 h


def test_work_that_completed_on_a_removed_cluster_does_not_run_again(
    tmp_path: Path, capsys: Capsys
) -> None:
    """nlp/done completed on west; west left the specs (and nlp/done its pin to it), and
    the next plan submitted it on east for its whole walltime: the store remembered the
    completion, but only on the clusters observed (user trial). Forgetting the cluster
    ends its runs and drops its placeholders; its completed work stays done."""
    docs = [*_docs(west=True), workload("done", "nlp", gpus=4, walltime="1h", clusters=["west"])]
    specs = write_specs(tmp_path / "s", docs)
    for hours in (0, 2):  # both start on west; nlp/done completes within the hour
        assert cp(capsys, "apply", specs, "--auto-approve", "--now", _at(hours)).code == 0
    unpinned = workload("done", "nlp", gpus=4, walltime="1h")
    write_specs(specs, [*_docs(west=False), unpinned])

    plan = cp(capsys, "plan", specs, "--json", "--now", _at(3)).json()
    assert plan["actions"] == [], "nlp/w1 is held, nlp/done is done"
    done = cp(capsys, "explain", "nlp/done", "--dir", specs, "--json", "--now", _at(3))
    assert done.json()["state"] == "completed"

    forgot = cp(capsys, "store", "forget-cluster", "west", "--dir", specs, "--json")
    assert forgot.json() == {"cluster": "west", "runs": 1, "placeholders": 0}
    planned = cp(capsys, "plan", specs, "--json", "--now", _at(3)).json()  # only reads
    applied = cp(capsys, "apply", specs, "--auto-approve", "--json", "--now", _at(3)).json()
    for made in (planned, applied):  # only the work that was running there starts anew
        assert [(a["op"], a["workload"]) for a in made["actions"]] == [("submit", "nlp/w1")]
    done = cp(capsys, "explain", "nlp/done", "--dir", specs, "--json", "--now", _at(5))
    assert done.json()["state"] == "completed"
    status = cp(capsys, "status", specs, "--json", "--now", _at(5)).json()
    assert [c["cluster"] for c in status["clusters"]] == ["east"], "west has no GPUs now"


def test_a_cancelled_run_the_cluster_still_shows_running_runs_on(tmp_path: Path) -> None:
    """The apply's word that it stopped a job stands only until an observation says
    otherwise: a cancel the cluster did not carry out leaves the run open."""
    store = Store(f"sqlite:///{tmp_path}/db")
    store.clock = lambda: T0 + timedelta(hours=1)
    run = JobRun(job="7", workload="nlp/w1", started_at=T0, gpus=4)
    store.record_runs({"west": [run]}, T0 + timedelta(minutes=30))
    store.stopped("west", "7")
    assert store.running_on("west") == {}
    store.record_runs({"west": [run]}, T0 + timedelta(hours=2))  # seen running still
    assert store.running_on("west") == {"nlp/w1": 4}


def test_the_job_kept_of_two_is_named_with_its_cluster() -> None:
    """A workload started again on east while west was out of the specs, then west back:
    the cancel of west's job 1000 read "job 1000 of nlp/w1 already holds its place", east's
    job having the same id (user trial)."""
    d = desired(
        [
            cluster("east", pools=[pool(nodes=1)]),
            cluster("west", pools=[pool(nodes=1)]),
            project("nlp", gpus=16),
            workload("w1", "nlp", gpus=4, walltime="1d"),
        ]
    )

    def side(name: str, hours: float) -> ClusterState:
        job = Job(
            id="1000",
            workload="nlp/w1",
            started_at=T0 + timedelta(hours=hours),
            replicas=[Replica(node="a100-01", gpus=4)],
            spec_digest=d.workloads["nlp/w1"].spec.digest,
        )
        return ClusterState(name=name, nodes=nodes_from_spec(d.clusters[name]), jobs=[job])

    made = plan(
        d,
        Snapshot(now=T0 + timedelta(hours=3), clusters=[side("east", 2), side("west", 0)]),
        now=T0 + timedelta(hours=3),
    )
    [cancel] = made.actions
    assert (cancel.cluster, cancel.job) == ("west", "1000")
    assert cancel.reason.message.startswith("job 1000 on east of nlp/w1 already holds its place")
