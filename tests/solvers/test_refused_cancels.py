"""A cancel the cluster refused is not planned again while its backoff lasts, whatever the
cancel was for: a job queued for an old version, on nodes others took, in a removed pool,
a second job of one workload, the rest of a gang a replica of which failed.

The eviction backoff (solvers/sitepolicy/refusals.py) covered victims and pruned jobs
only: such a cancel, refused (``scancel`` denied), was planned again in every cycle, and
its failure held back the rest of its cluster's actions each time. A queued job left
alone is the workload's job: no new version is submitted beside it (it may still start).
"""

from __future__ import annotations

import io
from datetime import timedelta

from rich.console import Console

from controlplane.cli.views.plan import print_plan
from controlplane.plan import Plan
from controlplane.reconcile import plan
from specs.actions import Op, ReasonCode
from specs.desired import DesiredState
from specs.snapshot import ClusterState, Job, JobState, Node, Replica, Snapshot
from tests.builders import NOW, cluster, desired, project, workload
from tests.builders.incidents import refusal

POOLS = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]


def _specs(gpus: int = 8) -> DesiredState:
    return desired([cluster(pools=POOLS), project("p", gpus=16), workload("late", "p", gpus=gpus)])


def _queued(job_id: str, node: str, d: DesiredState, **fields: object) -> Job:
    return Job(
        id=job_id,
        workload="p/late",
        state=JobState.PENDING,
        submitted_at=NOW - timedelta(minutes=10),
        replicas=[Replica(node=node, gpus=8)],
        plan_id="abc",
        pool="a100",
        reason="Resources",
        spec_digest=d.workloads["p/late"].spec.digest,
        **fields,  # type: ignore[arg-type]
    )


def _snapshot(jobs: list[Job], refused: str | None, minutes_ago: float = 0.5) -> Snapshot:
    nodes = [Node(name=f"a100-0{i}", pool="a100", gpu_type="a100_80", gpus=8) for i in (1, 2)]
    refusals = [refusal(refused, NOW - timedelta(minutes=minutes_ago))] if refused else []
    return Snapshot(
        now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=jobs)], refusals=refusals
    )


def _ops(p: Plan) -> list[tuple[Op, str | None]]:
    return sorted((a.op, a.job) for a in p.actions)


def _left_alone(p: Plan, job: str) -> None:
    """Nothing is planned, and the plan says which job is left alone, and why."""
    assert p.actions == [], _ops(p)
    [kept] = p.refused
    assert (kept.job, kept.workload, kept.op) == (job, "p/late", "cancel")


def test_a_job_queued_for_an_old_version_is_left_alone_and_no_new_one_submitted() -> None:
    old = _specs(gpus=8)
    jobs = [_queued("7", "a100-01", old)]
    edited = _specs(gpus=4)
    assert _ops(plan(edited, _snapshot(jobs, None), now=NOW)) == [
        (Op.CANCEL, "7"),
        (Op.SUBMIT, None),
    ]
    _left_alone(made := plan(edited, _snapshot(jobs, "7"), now=NOW), "7")
    [wait] = made.pending  # the edit is said where the workload is listed (review)
    assert wait.workload == "p/late" and wait.reason.code == ReasonCode.SPEC_CHANGED
    assert wait.reason.message == (
        "the edit needs a new job, but the cancel of job 7 failed once (job 7: "
        "Access/permission denied): it waits in the cluster's queue as it is (it may start "
        "as the version before), and the new version waits; tried again after "
        "2026-11-22T10:00:30Z"
    ), wait.reason.message
    # once the backoff (a minute after the first failure) has passed, it is tried again
    assert _ops(plan(edited, _snapshot(jobs, "7", minutes_ago=2), now=NOW)) == [
        (Op.CANCEL, "7"),
        (Op.SUBMIT, None),
    ]


def test_a_queued_job_on_taken_nodes_is_left_alone() -> None:
    d = _specs()
    theirs = Job(
        id="9",
        workload=None,
        state=JobState.RUNNING,
        replicas=[Replica(node="a100-01", gpus=4)],
        started_at=NOW - timedelta(minutes=5),
        pool="a100",
    )
    jobs = [_queued("7", "a100-01", d), theirs]
    assert _ops(plan(d, _snapshot(jobs, None), now=NOW)) == [(Op.CANCEL, "7"), (Op.SUBMIT, None)]
    _left_alone(plan(d, _snapshot(jobs, "7"), now=NOW), "7")


def test_a_job_queued_in_a_removed_pool_is_left_alone() -> None:
    d = _specs()
    jobs = [_queued("7", "a100-01", d).model_copy(update={"pool": "gone"})]
    assert _ops(plan(d, _snapshot(jobs, None), now=NOW)) == [(Op.CANCEL, "7"), (Op.SUBMIT, None)]
    _left_alone(plan(d, _snapshot(jobs, "7"), now=NOW), "7")


def test_a_second_job_of_a_workload_is_left_alone() -> None:
    d = _specs()
    jobs = [_queued("7", "a100-01", d), _queued("8", "a100-02", d)]
    assert _ops(plan(d, _snapshot(jobs, None), now=NOW)) == [(Op.CANCEL, "8")]
    _left_alone(made := plan(d, _snapshot(jobs, "8"), now=NOW), "8")
    shown = io.StringIO()
    print_plan(Console(file=shown, width=300), made)
    assert (
        "job 8 of p/late on sim is left as it is until 2026-11-22T10:00:30Z: its cancel failed "
        "once, last at 2026-11-22T09:59:30Z (job 8: Access/permission denied)"
    ) in shown.getvalue(), shown.getvalue()


def test_the_rest_of_a_gang_whose_replica_failed_is_left_alone() -> None:
    d = desired(
        [cluster(pools=POOLS), project("p", gpus=16), workload("late", "p", gpus=8, replicas=2)]
    )
    gang = Job(
        id="7",
        workload="p/late",
        state=JobState.COMPLETING,
        replicas=[Replica(node="a100-01", gpus=8)],
        started_at=NOW - timedelta(hours=1),
        submitted_at=NOW - timedelta(hours=1),
        plan_id="abc",
        pool="a100",
        reason="replica 1 failed",
        failed_replicas=1,
        spec_digest=d.workloads["p/late"].spec.digest,
    )
    assert _ops(plan(d, _snapshot([gang], None), now=NOW)) == [(Op.CANCEL, "7"), (Op.SUBMIT, None)]
    _left_alone(plan(d, _snapshot([gang], "7"), now=NOW), "7")


def test_a_second_job_left_alone_keeps_its_room() -> None:
    """Job 8, left as it is, may start on a100-02: nothing else is planned there (review:
    other work was submitted onto its node, to find it taken)."""
    d = desired(
        [
            cluster(pools=POOLS),
            project("p", gpus=16),
            workload("late", "p", gpus=8),
            workload("other", "p", gpus=8),
        ]
    )
    jobs = [_queued("7", "a100-01", d), _queued("8", "a100-02", d)]
    made = plan(d, _snapshot(jobs, None), now=NOW)  # 8 cancelled: other takes its node
    [submit] = [a for a in made.actions if a.op == Op.SUBMIT]
    assert [r.node for r in submit.replicas or []] == ["a100-02"]
    made = plan(d, _snapshot(jobs, "8"), now=NOW)
    assert made.actions == [], _ops(made)
    assert [p.workload for p in made.pending] == ["p/late", "p/other"]


def test_a_fan_out_candidate_that_lost_its_round_is_left_alone() -> None:
    """Candidate 11 lost its round (job 10 runs) and its cancel was refused: no cancel of
    it, as a loser or as a candidate other work would outrun (review); it keeps the room
    where it may start, and other work there waits."""
    pools = [
        {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1},
        {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "nodes": 1},
    ]
    d = desired(
        [
            cluster(pools=pools),
            project("p", gpus=16),
            workload("w", "p", gpus=4, walltime="30m", strategy={"fanOut": True, "maxParallel": 4}),
            workload("x", "p", gpus=4, walltime="30m", gpuTypes=["v100"]),
        ]
    )
    started = NOW - timedelta(minutes=6)
    common = {"workload": "p/w", "submitted_at": started, "plan_id": "pa"}
    winner = Job(
        id="10",
        state=JobState.RUNNING,
        pool="a100",
        candidate="sim.a100.1x4.direct",
        replicas=[Replica(node="a100-01", gpus=4)],
        started_at=NOW - timedelta(minutes=5),
        **common,  # type: ignore[arg-type]
    )
    loser = Job(
        id="11",
        state=JobState.PENDING,
        pool="v100",
        candidate="sim.v100.1x4.direct",
        replicas=[Replica(node=None, gpus=4)],
        **common,  # type: ignore[arg-type]
    )
    nodes = [
        Node(name="a100-01", pool="a100", gpu_type="a100_80", gpus=8),
        Node(name="v100-01", pool="v100", gpu_type="v100", gpus=4),
    ]

    def planned(refused: str | None) -> Plan:
        snap = _snapshot([winner, loser], refused)
        snap.clusters[0].nodes = nodes
        return plan(d, snap, now=NOW)

    assert _ops(planned(None)) == [(Op.CANCEL, "11"), (Op.SUBMIT, None)]
    made = planned("11")
    assert made.actions == [], _ops(made)
    assert [(r.job, r.workload) for r in made.refused] == [("11", "p/w")]
    assert [p.workload for p in made.pending] == ["p/x"]


def test_only_the_refused_job_of_a_workload_is_left_alone() -> None:
    """Two jobs queued for the old version, the cancel of one (8) refused: the other (7)
    is cancelled as before, and 8 stays the workload's job (it was per workload: both
    stayed, though only one cancel had failed)."""
    old = _specs(gpus=8)
    jobs = [_queued("7", "a100-01", old), _queued("8", "a100-02", old)]
    edited = _specs(gpus=4)
    assert _ops(plan(edited, _snapshot(jobs, None), now=NOW)) == [
        (Op.CANCEL, "7"),
        (Op.CANCEL, "8"),
        (Op.SUBMIT, None),
    ]
    made = plan(edited, _snapshot(jobs, "8"), now=NOW)
    assert _ops(made) == [(Op.CANCEL, "7")]
    assert [(r.job, r.op) for r in made.refused] == [("8", "cancel")]
    [wait] = made.pending
    assert wait.workload == "p/late" and wait.reason.code == ReasonCode.SPEC_CHANGED
    assert "the cancel of job 8 failed once" in wait.reason.message, wait.reason.message


def test_only_the_refused_one_of_two_stranded_jobs_is_left_alone() -> None:
    """Both queued jobs sit on nodes others took; 8's cancel was refused: 7 is cancelled,
    and 8 stays the workload's job."""
    d = _specs()
    theirs = [
        Job(
            id=f"9{i}",
            workload=None,
            state=JobState.RUNNING,
            replicas=[Replica(node=f"a100-0{i}", gpus=4)],
            started_at=NOW - timedelta(minutes=5),
            pool="a100",
        )
        for i in (1, 2)
    ]
    jobs = [_queued("7", "a100-01", d), _queued("8", "a100-02", d), *theirs]
    # no node has room for a new one either: both go, and the workload waits
    assert _ops(plan(d, _snapshot(jobs, None), now=NOW)) == [(Op.CANCEL, "7"), (Op.CANCEL, "8")]
    made = plan(d, _snapshot(jobs, "8"), now=NOW)
    assert _ops(made) == [(Op.CANCEL, "7")]
    assert [(r.job, r.op) for r in made.refused] == [("8", "cancel")]


def test_a_running_second_job_left_alone_counts_against_its_project() -> None:
    """Jobs 7 and 8 both run p/late (an apply stopped between a replacement's submit and
    its cancel, say); 7's cancel was refused, so it runs on: its 8 GPUs are p's. With
    them p is at its limit of 16, and p/other waits though a node is free (the GPUs were
    charged to no queue: p/other started, and p held 24 of its limit of 16)."""
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 3}]
    d = desired(
        [
            cluster(pools=pools),
            project("p", gpus=8, limit=16),
            workload("late", "p", gpus=8),
            workload("other", "p", gpus=8),
        ]
    )
    digest = d.workloads["p/late"].spec.digest
    running = [
        Job(
            id=job_id,
            workload="p/late",
            state=JobState.RUNNING,
            replicas=[Replica(node=node, gpus=8)],
            started_at=NOW - timedelta(minutes=minutes),
            submitted_at=NOW - timedelta(minutes=minutes),
            plan_id="abc",
            pool="a100",
            spec_digest=digest,
        )
        for job_id, node, minutes in (("7", "a100-01", 30), ("8", "a100-02", 20))
    ]
    snap = _snapshot(running, "7")
    snap.clusters[0].nodes = [
        Node(name=f"a100-0{i}", pool="a100", gpu_type="a100_80", gpus=8) for i in (1, 2, 3)
    ]
    made = plan(d, snap, now=NOW)
    assert made.actions == [], _ops(made)
    [wait] = made.pending
    assert (wait.workload, wait.reason.code) == ("p/other", ReasonCode.OVER_LIMIT)
    assert made.projects["p"].allocated == 16


def test_a_running_loser_of_a_completed_fan_out_round_counts_against_its_project() -> None:
    """Candidate 11 runs on though job 10 won the round and completed; its cancel was
    refused, so its 4 GPUs are p's: p is at its limit of 4, and p/x waits (review: the
    workload was done, so no request charged them, and p/x started beside it)."""
    pools = [
        {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1},
        {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "nodes": 1},
    ]
    d = desired(
        [
            cluster(pools=pools),
            project("p", gpus=4, limit=4),
            workload("w", "p", gpus=4, walltime="30m", strategy={"fanOut": True, "maxParallel": 4}),
            workload("x", "p", gpus=4, walltime="30m", gpuTypes=["a100_80"]),
        ]
    )
    common = {"workload": "p/w", "submitted_at": NOW - timedelta(hours=1), "plan_id": "pa"}
    winner = Job(
        id="10",
        state=JobState.COMPLETED,
        pool="a100",
        candidate="sim.a100.1x4.direct",
        replicas=[Replica(node="a100-01", gpus=4)],
        started_at=NOW - timedelta(minutes=50),
        ended_at=NOW - timedelta(minutes=20),
        **common,  # type: ignore[arg-type]
    )
    loser = Job(
        id="11",
        state=JobState.RUNNING,
        pool="v100",
        candidate="sim.v100.1x4.direct",
        replicas=[Replica(node="v100-01", gpus=4)],
        started_at=NOW - timedelta(minutes=10),
        **common,  # type: ignore[arg-type]
    )
    snap = _snapshot([winner, loser], "11")
    snap.clusters[0].nodes = [
        Node(name="a100-01", pool="a100", gpu_type="a100_80", gpus=8),
        Node(name="v100-01", pool="v100", gpu_type="v100", gpus=4),
    ]
    made = plan(d, snap, now=NOW)
    assert made.actions == [], _ops(made)
    [wait] = made.pending
    assert (wait.workload, wait.reason.code) == ("p/x", ReasonCode.OVER_LIMIT)
    assert made.projects["p"].allocated == 4
