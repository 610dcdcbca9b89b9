"""observe(): what the store adds to the clusters' report, against a scripted adapter.

A real cluster forgets: a pending job may not be listed yet, an ended job is dropped
after a while (Slurm's MinJobAge). These tests script exactly such reports.
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from controlplane.observe import observe
from controlplane.reconcile import plan
from controlplane.store import Store
from specs.actions import ReasonCode
from specs.snapshot import ClusterState, Job, JobState, Node, Replica
from tests.builders import NOW, cluster, desired, project, workload
from tests.builders.cli import CP, cp, write_specs

DESIRED = desired([cluster(), project("p", gpus=8), workload("w", "p", gpus=1)])


class Scripted:
    """An adapter that reports the given jobs on one idle 8-GPU node."""

    def __init__(self, cluster: str = "sim") -> None:
        self.cluster = cluster
        self.jobs: list[Job] = []

    def observe(self) -> ClusterState:
        node = Node(name="n1", pool="a100", gpu_type="a100_80", gpus=8)
        return ClusterState(name=self.cluster, nodes=[node], jobs=list(self.jobs))

    def execute(self, action, *, plan_id):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def job(state: JobState, started: bool) -> Job:
    return Job(
        id="41",
        workload="p/w",
        state=state,
        started_at=NOW - timedelta(minutes=1) if started else None,
        replicas=[Replica(node="n1" if started else None, gpus=1)],
    )


def test_a_submission_not_listed_yet_waits_until_it_runs(tmp_path: Path) -> None:
    store, adapter = Store(f"sqlite:///{tmp_path}/db"), Scripted()
    store.add_placeholder("p/w", "sim", "41", "plan-1")
    snap = observe(DESIRED, {"sim": adapter}, NOW + timedelta(seconds=10), store)
    planned = plan(DESIRED, snap, now=snap.now)
    assert planned.actions == []
    assert [(p.workload, p.reason.code) for p in planned.pending] == [("p/w", ReasonCode.SUBMITTED)]

    adapter.jobs = [job(JobState.RUNNING, started=True)]
    observe(DESIRED, {"sim": adapter}, NOW + timedelta(seconds=20), store)
    assert store.placeholders() == [], "a running job needs no placeholder"


def test_a_completed_workload_stays_completed_after_the_cluster_forgets_it(tmp_path: Path) -> None:
    store, adapter = Store(f"sqlite:///{tmp_path}/db"), Scripted()
    adapter.jobs = [job(JobState.COMPLETED, started=True)]
    observe(DESIRED, {"sim": adapter}, NOW, store)
    adapter.jobs = []  # MinJobAge later
    snap = observe(DESIRED, {"sim": adapter}, NOW + timedelta(minutes=10), store)
    [remembered] = snap.clusters[0].jobs
    assert (remembered.id, remembered.state) == ("41", JobState.COMPLETED)
    assert plan(DESIRED, snap, now=snap.now).actions == [], "not started again"

    # removed from the specs, the memory goes too: added back, it runs again
    gone = desired([cluster(), project("p", gpus=8)])
    observe(gone, {"sim": adapter}, NOW + timedelta(minutes=11), store)
    snap = observe(DESIRED, {"sim": adapter}, NOW + timedelta(minutes=12), store)
    assert snap.clusters[0].jobs == []
    assert [a.workload for a in plan(DESIRED, snap, now=snap.now).actions] == ["p/w"]


def test_a_completion_outlives_the_cluster_it_ran_on(tmp_path: Path) -> None:
    """The cluster a workload completed on leaves the specs: its completion was recalled
    onto that cluster's report, and with no report of it the workload looked never run and
    ran again for its whole walltime on another cluster (user trial)."""
    store, adapter = Store(f"sqlite:///{tmp_path}/db"), Scripted()
    ended = job(JobState.COMPLETED, started=True).model_copy(update={"ended_at": NOW})
    adapter.jobs = [ended]
    observe(DESIRED, {"sim": adapter}, NOW, store)
    assert store.clusters_with_work() == set(), "nothing of ours left there"
    moved = desired([cluster("east"), project("p", gpus=8), workload("w", "p", gpus=1)])
    for minutes in (10, 11):  # a plan (read only), then an observation that records
        later = NOW + timedelta(minutes=minutes)
        snap = observe(moved, {"east": Scripted("east")}, later, store, record=minutes == 11)
        assert [(c, j.id, j.state) for c, j in snap.jobs_of("p/w")] == [
            ("sim", "41", JobState.COMPLETED)
        ]
        assert plan(moved, snap, now=snap.now).actions == [], "not started again"


def test_a_remembered_completion_keeps_the_time_its_job_ended(tmp_path: Path) -> None:
    """A completed job the cluster has forgotten comes back from the store with the time
    it ended, not the time an observation first saw it ended (user trial on Slurm: `cp
    explain` said it ended when `cp apply` noticed, minutes late with a long interval)."""
    store, adapter = Store(f"sqlite:///{tmp_path}/db"), Scripted()
    ended_at = NOW - timedelta(minutes=7)
    adapter.jobs = [job(JobState.COMPLETED, started=True).model_copy(update={"ended_at": ended_at})]
    observe(DESIRED, {"sim": adapter}, NOW, store)  # seen 7 minutes after it ended
    adapter.jobs = []  # MinJobAge later
    snap = observe(DESIRED, {"sim": adapter}, NOW + timedelta(minutes=10), store)
    assert [j.ended_at for _, j in snap.jobs_of("p/w")] == [ended_at]


def test_a_job_id_the_cluster_gives_again_is_not_the_remembered_job(tmp_path: Path) -> None:
    """Slurm numbers jobs afresh after it loses its state (and wraps at MaxJobId): job 41
    of another workload ran while the store remembered p/w's completed job 41. Both came
    with id 41, the live one read as p/w's: an "old version" edited into the other's spec,
    its GPUs counted as p/w's, and a plan cut short ("job 41 belongs to workload p/w";
    trialP, a real Slurm cluster started afresh). The live job keeps its id; the memory
    stays, under another."""
    two = desired(
        [cluster(), project("p", gpus=8), workload("w", "p", gpus=1), workload("v", "p", gpus=2)]
    )
    store, adapter = Store(f"sqlite:///{tmp_path}/db"), Scripted()
    ended = job(JobState.COMPLETED, started=True).model_copy(update={"ended_at": NOW})
    adapter.jobs = [ended]
    observe(two, {"sim": adapter}, NOW, store)
    live = Job(
        id="41",
        workload="p/v",
        state=JobState.RUNNING,
        started_at=NOW + timedelta(minutes=9),
        replicas=[Replica(node="n1", gpus=2)],
        spec_digest=two.workloads["p/v"].spec.digest,
    )
    adapter.jobs = [live]  # the controller started afresh: its first job is 41 again
    snap = observe(two, {"sim": adapter}, NOW + timedelta(minutes=10), store)
    jobs = snap.clusters[0].jobs
    assert len({j.id for j in jobs}) == len(jobs) == 2, [j.id for j in jobs]
    assert [j.workload for j in jobs if j.id == "41"] == ["p/v"]
    made = plan(two, snap, now=snap.now)
    assert made.actions == [] and made.pending == [] and not made.solver.cut_short
    assert made.projects["p"].held == 2, "p/v's GPUs, as it runs"


def test_an_edit_after_completion_is_told_after_the_cluster_forgets_the_job(
    tmp_path: Path,
) -> None:
    """A completed workload edited later does not run again, and the plan says so with the
    change (user trial: "No changes", no hint), also once only the store remembers the
    job: the completion keeps the digest of the spec it ran."""
    store, adapter = Store(f"sqlite:///{tmp_path}/db"), Scripted()
    ran = DESIRED.workloads["p/w"].spec
    adapter.jobs = [
        job(JobState.COMPLETED, started=True).model_copy(update={"spec_digest": ran.digest})
    ]
    observe(DESIRED, {"sim": adapter}, NOW, store)
    adapter.jobs = []  # MinJobAge later
    edited = desired([cluster(), project("p", gpus=8), workload("w", "p", gpus=1, command=["v2"])])
    snap = observe(edited, {"sim": adapter}, NOW + timedelta(minutes=10), store)
    made = plan(edited, snap, now=snap.now)
    assert made.actions == [] and made.pending == []
    [told] = made.finished
    assert told.workload == "p/w" and told.reason.code == ReasonCode.SPEC_CHANGED
    assert "command: " in told.reason.message and "after its job completed" in told.reason.message
    unedited = plan(DESIRED, observe(DESIRED, {"sim": adapter}, NOW, store), now=NOW)
    assert unedited.finished == [], "the spec it ran: nothing to tell"


def test_an_edit_to_a_failed_workload_ends_its_backoff(tmp_path: Path) -> None:
    """A fixed command waited out the backoff of the broken one's failures (up to an hour
    after a streak; user trial). The failures were the old version's: an edit runs the new
    version at once, also once only the store remembers the failure."""
    store, adapter = Store(f"sqlite:///{tmp_path}/db"), Scripted()
    ran = DESIRED.workloads["p/w"].spec
    failed = job(JobState.FAILED, started=True).model_copy(
        update={"spec_digest": ran.digest, "ended_at": NOW}
    )
    adapter.jobs = [failed]
    snap = observe(DESIRED, {"sim": adapter}, NOW + timedelta(seconds=10), store)
    waiting = plan(DESIRED, snap, now=snap.now)
    assert waiting.actions == []
    assert [(p.workload, p.reason.code) for p in waiting.pending] == [("p/w", ReasonCode.FAILED)]
    adapter.jobs = []  # the cluster forgets the job: the store remembers the failure
    fixed = desired([cluster(), project("p", gpus=8), workload("w", "p", gpus=1, command=["v2"])])
    snap = observe(fixed, {"sim": adapter}, NOW + timedelta(seconds=20), store)
    assert [a.workload for a in plan(fixed, snap, now=snap.now).actions] == ["p/w"]


def test_a_job_that_ran_out_of_its_walltime_is_told_so(tmp_path: Path) -> None:
    """A walltime expiry read "job 41 failed (exit 0:15)", no word of TIMEOUT (user trial
    on real Slurm). The wait says it ran out of its walltime, also once only the store
    remembers the job."""
    store, adapter = Store(f"sqlite:///{tmp_path}/db"), Scripted()
    adapter.jobs = [
        job(JobState.TIMEOUT, started=True).model_copy(
            update={"ended_at": NOW, "exit_code": "0:15"}
        )
    ]
    for seen in (True, False):  # in view, then remembered by the store alone
        if not seen:
            adapter.jobs = []
        snap = observe(DESIRED, {"sim": adapter}, NOW + timedelta(seconds=10), store)
        [waits] = plan(DESIRED, snap, now=snap.now).pending
        assert waits.reason.code == ReasonCode.FAILED
        assert "job 41 ran out of its walltime (TIMEOUT, exit 0:15)" in waits.reason.message


def test_a_failed_or_cancelled_job_is_not_remembered_as_completed(tmp_path: Path) -> None:
    store, adapter = Store(f"sqlite:///{tmp_path}/db"), Scripted()
    adapter.jobs = [job(JobState.FAILED, started=True)]
    observe(DESIRED, {"sim": adapter}, NOW, store)
    adapter.jobs = []
    snap = observe(DESIRED, {"sim": adapter}, NOW + timedelta(minutes=10), store)
    assert snap.clusters[0].jobs == []


def test_jobs_another_store_made_are_not_pruned_or_charged(tmp_path: Path) -> None:
    """Two spec repos, each with its own store, on one cluster: the second pruned the
    first's jobs ("no longer in the specs") and charged their GPU-hours to its project of
    the same name, since any job carrying a control plane tag counted as its own (user
    trial on real Slurm; a hand-made job with such a tag was cancelled too). A tagged job
    whose plan this store never made, of a workload not in its specs, is somebody else's:
    its GPUs count, and it is never touched."""
    a = write_specs(
        tmp_path / "a", [cluster("sim"), project("p"), workload("team-a-job", "p", gpus=2)]
    )
    assert subprocess.run([CP, "apply", str(a), "--auto-approve"], timeout=120).returncode == 0
    b = write_specs(tmp_path / "b", [cluster("sim"), project("p"), workload("mine", "p", gpus=2)])
    (b / ".cp").mkdir()
    (b / ".cp" / "simulator").symlink_to(a / ".cp" / "simulator")  # the same cluster
    later = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    planned = subprocess.run(
        [CP, "plan", str(b), "--json", "--now", later], capture_output=True, text=True, timeout=120
    )
    doc = json.loads(planned.stdout)
    assert [(x["op"], x["workload"]) for x in doc["actions"]] == [("submit", "p/mine")]
    used = subprocess.run(
        [CP, "usage", str(b), "--json", "--now", later], capture_output=True, text=True, timeout=120
    )
    assert json.loads(used.stdout)["projects"]["p"]["monthGpuHours"] == 0
    jobs = subprocess.run(
        [CP, "get", "jobs", str(b), "-o", "json"], capture_output=True, text=True, timeout=120
    )
    [theirs] = json.loads(jobs.stdout)["items"]
    assert theirs["workload"] is None and "another control plane" in (theirs["owner"] or "")


def test_work_that_lost_its_node_keeps_its_place_in_the_queue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A node failure is not the workload's fault: it re-entered the queue at the failure,
    and work that had waited less took the room first when it came back (user trial). It
    keeps the place its lost job had: when that job was submitted."""
    pools = [
        {"name": "x", "gpuType": "a100_80", "gpusPerNode": 4, "nodes": 1},
        {"name": "y", "gpuType": "a100_80", "gpusPerNode": 4, "nodes": 1},
    ]
    docs = [
        cluster(pools=pools),
        project("p", gpus=8),
        workload("old", "p", gpus=4, walltime="10h"),
        workload("blocker", "p", gpus=4, priority=90, walltime="3h"),
    ]
    specs = write_specs(tmp_path / "s", docs)
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-11-30T00:00:00Z").code == 0
    jobs = cp(capsys, "get", "jobs", specs, "-o", "json").json()["items"]
    [lost] = [j["pool"] for j in jobs if j["workload"] == "p/old"]
    later = [*docs, workload("new", "p", gpus=4, walltime="10h")]
    write_specs(specs, later)
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-11-30T01:00:00Z").code == 0
    # the node under p/old fails at 02:00 (the simulator has no failures of its own: its
    # state says so, as a real cluster reports a job that lost its node)
    state_file = specs / ".cp" / "simulator" / "sim.json"
    state = json.loads(state_file.read_text())
    for j in state["state"]["jobs"]:
        if j["workload"] == "p/old":
            j["state"], j["endedAt"] = "NODE_FAIL", "2026-11-30T02:00:00Z"
    state_file.write_text(json.dumps(state))
    assert lost  # (the pool it ran in)
    res = cp(capsys, "plan", specs, "--json", "--now", "2026-11-30T02:00:01Z")
    assert [(a["op"], a["workload"]) for a in res.json()["actions"]] == [("submit", "p/old")]


def test_work_preempted_keeps_its_place_in_the_queue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A workload preempted (here reclaimed by a project under its deserved share) went
    back to the end of the queue: its age read 0 at the next observation, and work that
    had waited less went ahead of it (trialO). As for a node failure, losing its GPUs was
    not its doing: it keeps the place its job had, when that job was submitted (KAI's
    evicted pod keeps its pod group, and its age)."""
    docs = [
        cluster(pools=[{"name": "x", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1}]),
        project("a", gpus=4),
        project("b", gpus=4),
        workload("big", "a", gpus=8, walltime="10h"),
    ]
    specs = write_specs(tmp_path / "s", docs)
    t0, t1 = "2026-11-30T00:00:00Z", "2026-11-30T01:00:00Z"
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", t0).code == 0
    write_specs(specs, [*docs, workload("claim", "b", gpus=4, walltime="10h")])
    applied = cp(capsys, "apply", specs, "--auto-approve", "--json", "--now", t1).json()
    assert ("preempt", "a/big") in {(a["op"], a["workload"]) for a in applied["actions"]}
    items = cp(capsys, "get", "workloads", specs, "-o", "json", "--now", t1).json()["items"]
    [big] = [w for w in items if w["name"] == "a/big"]
    assert big["state"] != "running" and big["since"].startswith("2026-11-30T00:00:00")
