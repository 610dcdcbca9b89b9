"""Work winding down (COMPLETING: a pod in its termination grace, a Slurm job being
killed or evicted) is left to end.

From a user trial on Kubernetes: a plan made while a pruned pod terminated planned its
cancel again (and an apply then deleted it again and recorded a second cancel); a gang
one of whose pods had failed was "grown back" in place by every plan.
"""

from __future__ import annotations

from datetime import timedelta

from controlplane.reconcile import plan
from specs.desired import DesiredState
from specs.snapshot import ClusterState, Job, JobState, Node, Replica, Snapshot
from tests.builders import NOW, cluster, desired, project, workload

POOLS = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]


def _world(d: DesiredState, *jobs: tuple[str, str, JobState, list[str]]) -> Snapshot:
    nodes = [Node(name=f"a100-0{i}", pool="a100", gpu_type="a100_80", gpus=8) for i in (1, 2)]
    return Snapshot(
        now=NOW,
        clusters=[
            ClusterState(
                name="sim",
                nodes=nodes,
                jobs=[
                    Job(
                        id=job_id,
                        workload=key,
                        state=state,
                        started_at=NOW - timedelta(hours=1),
                        replicas=[Replica(node=n, gpus=4) for n in on],
                        pool="a100",
                        spec_digest=d.workloads[key].spec.digest if key in d.workloads else None,
                    )
                    for job_id, key, state, on in jobs
                ],
            )
        ],
    )


def test_a_pruned_job_winding_down_is_not_cancelled_again() -> None:
    d = desired([cluster(pools=POOLS), project("p", gpus=8), workload("kept", "p", gpus=4)])
    snap = _world(
        d,
        ("1", "p/kept", JobState.RUNNING, ["a100-01"]),
        ("2", "p/gone", JobState.COMPLETING, ["a100-02"]),
    )
    assert plan(d, snap, now=NOW).actions == []


def test_a_duplicate_winding_down_is_not_cancelled_again() -> None:
    d = desired([cluster(pools=POOLS), project("p", gpus=8), workload("w", "p", gpus=4)])
    snap = _world(
        d,
        ("1", "p/w", JobState.RUNNING, ["a100-01"]),
        ("2", "p/w", JobState.COMPLETING, ["a100-02"]),
    )
    assert plan(d, snap, now=NOW).actions == []


def test_a_gang_that_lost_a_replica_is_not_grown_back_while_it_winds_down() -> None:
    d = desired(
        [cluster(pools=POOLS), project("p", gpus=8), workload("gang", "p", gpus=4, replicas=2)]
    )
    snap = _world(d, ("1", "p/gang", JobState.COMPLETING, ["a100-01"]))
    p = plan(d, snap, now=NOW)
    assert p.actions == [] and [(w.workload, w.reason.code.value) for w in p.pending] == [
        ("p/gang", "ending")
    ]


def test_the_new_job_of_a_move_is_kept_while_the_old_one_winds_down() -> None:
    """A move (or replacement) ends the old job and starts the new one. A plan made while
    the old job is still winding down took it for the workload's job, and the new job,
    queued or running, for an extra one to cancel."""
    d = desired([cluster(pools=POOLS), project("p", gpus=8), workload("w", "p", gpus=4)])
    for state in (JobState.PENDING, JobState.RUNNING):
        snap = _world(
            d, ("1", "p/w", JobState.COMPLETING, ["a100-01"]), ("2", "p/w", state, ["a100-02"])
        )
        p = plan(d, snap, now=NOW)
        assert p.actions == [], state


def test_a_pruned_jobs_gpus_are_free_for_the_same_plan() -> None:
    """Removing one workload and adding another in one change: the pruned job's GPUs were
    free only from the plan's second round, so its first round reclaimed an unrelated job
    for the new one and the second put it back: shown net, a restart on the node it ran
    on (user trial on Kubernetes, and on the simulator)."""
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1}]
    d = desired(
        [
            cluster(pools=pools),
            project("vision", gpus=6),
            project("ops", gpus=0),
            project("audio", gpus=2),
            workload("x", "ops", gpus=1),
            workload("wav", "audio", gpus=1),
            workload("small", "audio", gpus=1),
        ]
    )
    node = Node(name="a100-01", pool="a100", gpu_type="a100_80", gpus=8)
    jobs = [
        Job(id=i, workload=w, started_at=NOW - timedelta(hours=1), pool="a100",
            replicas=[Replica(node="a100-01", gpus=g)],
            spec_digest=d.workloads[w].spec.digest if w in d.workloads else None)
        for i, w, g in (("1", "vision/big", 6), ("2", "ops/x", 1), ("3", "audio/wav", 1))
    ]  # fmt: skip
    snap = Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=[node], jobs=jobs)])
    p = plan(d, snap, now=NOW)
    assert sorted((a.op.value, a.workload) for a in p.actions) == [
        ("cancel", "vision/big"),
        ("submit", "audio/small"),
    ]


def test_work_winding_down_is_not_moved() -> None:
    """Consolidation moved a job winding down (an evicted checkpointable job within its
    grace): its workload started elsewhere before the old job had saved and ended."""
    d = desired(
        [
            cluster(pools=POOLS),
            project("p", gpus=16),
            workload("ending", "p", gpus=4),
            workload("steady", "p", gpus=4, type="interactive"),  # never moved
            workload("big", "p", gpus=6),
        ]
    )
    snap = _world(
        d,
        ("1", "p/ending", JobState.COMPLETING, ["a100-01"]),
        ("2", "p/steady", JobState.RUNNING, ["a100-02"]),
    )
    p = plan(d, snap, now=NOW)
    assert p.actions == [], [(a.op, a.workload) for a in p.actions]


def test_work_winding_down_is_not_evicted_again_nor_counted_against_its_project() -> None:
    """An evicted checkpointable job within its grace still holds its GPUs. Every plan
    made in the grace evicted it again ("project p holds 6 GPUs, above its limit of 4"),
    and an apply recorded a second preemption with that reason (user trial on Slurm).
    It is as good as gone: no victim, and not held against its project's quotas and
    limit; its GPUs stay taken until it ends."""
    d = desired(
        [
            cluster(pools=POOLS),
            project("p", gpus=8, limit=8),
            workload("low", "p", gpus=4, priority=10),
            workload("high", "p", gpus=4, replicas=2, priority=90),
            workload("next", "p", gpus=4, priority=50),
        ]
    )
    snap = _world(
        d,
        ("1", "p/low", JobState.COMPLETING, ["a100-01"]),
        ("2", "p/high", JobState.RUNNING, ["a100-02", "a100-02"]),
    )
    p = plan(d, snap, now=NOW)
    assert p.actions == [], [(a.op, a.workload, a.reason.message) for a in p.actions]
    assert [(w.workload, w.reason.code.value) for w in p.pending] == [
        ("p/low", "ending"),
        ("p/next", "over-limit"),
    ]
    assert "holds 8 of its limit of 8" in p.pending[1].reason.message
    assert p.projects["p"].allocated == 8


def test_on_slurm_an_elastic_job_is_not_grown_within_min_runtime() -> None:
    """Slurm cannot resize a job in place: growing it submits the new shape and cancels
    the old job, restarting every replica. A job grown 30 s after it started, within its
    project's 3-minute minRuntime, lost its progress and its protection (user trial).
    Kubernetes and the simulator add replicas in place."""
    for adapter, minutes_ago, grows in (
        ("slurm", 1, False),
        ("slurm", 20, True),
        ("simulator", 1, True),
    ):
        d = desired(
            [
                cluster(pools=POOLS, adapter=adapter),
                project("p", gpus=16, minRuntime="10m"),
                workload("wide", "p", gpus=4, replicas=3, minReplicas=1),
            ]
        )
        snap = _world(d, ("1", "p/wide", JobState.RUNNING, ["a100-01"]))
        job = snap.clusters[0].jobs[0]
        job.started_at = NOW - timedelta(minutes=minutes_ago)
        p = plan(d, snap, now=NOW)
        assert [a.op.value for a in p.actions] == (["resize"] if grows else []), (
            adapter,
            p.actions,
        )


def test_a_checkpointing_job_is_replaced_only_once_it_has_saved_and_ended() -> None:
    """An edit to a running checkpointable workload cancelled the old job and submitted the
    new version at once: on Kubernetes and Slurm the old job runs on through its checkpoint
    grace, so the new copy started on other nodes before the checkpoint it should resume
    from was written, both running (user trial). The plan now cancels the old job, and the
    new version starts in the plan after that job has ended."""
    ckpt = {"signal": "USR1", "grace": "5m"}
    before = desired(
        [cluster(pools=POOLS), project("p", gpus=16), workload("ft", "p", gpus=4, checkpoint=ckpt)]
    )
    after = desired(
        [cluster(pools=POOLS), project("p", gpus=16), workload("ft", "p", gpus=2, checkpoint=ckpt)]
    )
    old = before.workloads["p/ft"].spec

    def world(state: JobState) -> Snapshot:
        snap = _world(before, ("1", "p/ft", state, ["a100-01"]))
        snap.versions = {old.digest: old}
        return snap

    running = plan(after, world(JobState.RUNNING), now=NOW)
    assert [(a.op.value, a.job) for a in running.actions] == [("cancel", "1")]
    [waits] = running.pending
    assert waits.workload == "p/ft" and waits.reason.code.value == "spec-changed"
    assert "job 1 saves its checkpoint first" in waits.reason.message, waits.reason.message
    saving = plan(after, world(JobState.COMPLETING), now=NOW)
    assert saving.actions == [] and [w.workload for w in saving.pending] == ["p/ft"]
    assert "job 1 saves its checkpoint first" in saving.pending[0].reason.message
    ended = plan(after, world(JobState.CANCELLED), now=NOW)
    assert [(a.op.value, a.workload) for a in ended.actions] == [("submit", "p/ft")]


def test_a_checkpointing_job_is_not_cancelled_for_a_version_that_cannot_start() -> None:
    """Cancelled first, it must still be for a new version the plan could place: one that
    fits nowhere, even with the old job's GPUs, leaves the old version running."""
    ckpt = {"signal": "USR1", "grace": "5m"}
    before = desired(
        [cluster(pools=POOLS), project("p", gpus=16), workload("ft", "p", gpus=4, checkpoint=ckpt)]
    )
    after = desired(
        [cluster(pools=POOLS), project("p", gpus=16), workload("ft", "p", gpus=8, checkpoint=ckpt)]
    )
    old = before.workloads["p/ft"].spec
    snap = _world(before, ("1", "p/ft", JobState.RUNNING, ["a100-01"]))
    others = [("x", ["a100-01"], 4), ("y", ["a100-02"], 8)]  # somebody else's, on both nodes
    snap.clusters[0].jobs += [
        Job(
            id=i,
            workload=None,
            state=JobState.RUNNING,
            replicas=[Replica(node=n, gpus=g) for n in on],
        )
        for i, on, g in others
    ]
    snap.versions = {old.digest: old}
    p = plan(after, snap, now=NOW)
    assert p.actions == [], [(a.op, a.reason.message) for a in p.actions]
    [waits] = p.pending
    assert waits.workload == "p/ft" and "saves its checkpoint" not in waits.reason.message


def test_work_waiting_for_gpus_that_work_winding_down_holds_says_so() -> None:
    """After an apply stopped between a checkpoint preemption and the submit it made room
    for, the waiting workload read "no-capacity: ... 0 free" (user trial on Slurm): nothing
    said the GPUs were held by the job being preempted for it, free within its grace."""
    d = desired(
        [
            cluster(pools=POOLS),
            project("p", gpus=16),
            workload("low", "p", gpus=4, replicas=2, priority=10),
            workload("high", "p", gpus=8, priority=90),
        ]
    )
    snap = _world(d, ("1", "p/low", JobState.COMPLETING, ["a100-01", "a100-02"]))
    made = plan(d, snap, now=NOW)
    assert made.actions == []
    [waits] = [p for p in made.pending if p.workload == "p/high"]
    assert waits.reason.code.value == "no-capacity"
    assert "8 GPUs there are held by work winding down (job 1 of p/low)" in (
        waits.reason.message
    ), waits.reason.message


def test_a_gang_whose_replica_failed_while_the_others_run_is_stopped() -> None:
    """A gang one of whose pods failed (evicted by the kubelet) while the others ran on was
    left "ending" for good (user trial on Kubernetes): nothing stopped the survivors, which
    held their GPUs, uncharged, past the project's limit. The plan stops them: the gang
    cannot go on without its replica."""
    d = desired(
        [cluster(pools=POOLS), project("p", gpus=8), workload("gang", "p", gpus=4, replicas=2)]
    )
    snap = _world(d, ("1", "p/gang", JobState.COMPLETING, ["a100-01"]))
    failing = snap.clusters[0].jobs[0]
    failing.failed_replicas = 1
    failing.reason = "replica failed (Evicted: the node was low on memory); the others still run"
    made = plan(d, snap, now=NOW)
    ops = sorted((a.op.value, a.workload, a.job) for a in made.actions)
    assert ops == [("cancel", "p/gang", "1"), ("submit", "p/gang", None)], "again, whole"
    [cancel] = [a for a in made.actions if a.op.value == "cancel"]
    assert cancel.reason.code.value == "failed"
    assert "Evicted" in cancel.reason.message and "cannot go on" in cancel.reason.message
    # winding down for another reason (a cancel in its grace): left to end, as before
    failing.failed_replicas = None
    assert [a for a in plan(d, snap, now=NOW).actions if a.op.value == "cancel"] == []


def test_an_edited_workload_whose_job_winds_down_without_a_checkpoint_says_so() -> None:
    """An edited workload whose job was winding down (pods being deleted after an apply
    stopped mid-shrink) read "job … saves its checkpoint first", though it has no
    checkpoint (user trial on Kubernetes)."""
    before = desired([cluster(pools=POOLS), project("p", gpus=8), workload("w", "p", gpus=4)])
    after = desired([cluster(pools=POOLS), project("p", gpus=8), workload("w", "p", gpus=2)])
    snap = _world(before, ("1", "p/w", JobState.COMPLETING, ["a100-01"]))
    snap.versions = {before.workloads["p/w"].spec.digest: before.workloads["p/w"].spec}
    [waits] = [p for p in plan(after, snap, now=NOW).pending if p.workload == "p/w"]
    assert "checkpoint" not in waits.reason.message, waits.reason.message
    assert "job 1 winds down" in waits.reason.message


def test_a_workload_whose_job_winds_down_is_listed_as_waiting() -> None:
    """While a workload's pods were being deleted (by hand, an eviction, an apply stopped in
    a move) the plan read "No changes. The clusters match the specs." and the workload was
    neither among the actions nor among the waiting (user trial on Kubernetes), though
    nothing of it would run once its job has ended."""
    from rich.console import Console

    from controlplane.cli.views.plan import print_plan

    d = desired([cluster(pools=POOLS), project("p", gpus=8), workload("w", "p", gpus=4)])
    snap = _world(d, ("1", "p/w", JobState.COMPLETING, ["a100-01"]))
    snap.clusters[0].jobs[0].reason = "being deleted"
    made = plan(d, snap, now=NOW)
    assert made.actions == []
    [ending] = made.pending
    assert (ending.workload, ending.reason.code.value) == ("p/w", "ending")
    assert "job 1 winds down (being deleted)" in ending.reason.message
    console = Console(record=True, width=100)
    print_plan(console, made)
    text = console.export_text()
    assert "match the specs" not in text and "No changes now" in text
