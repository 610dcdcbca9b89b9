"""A node under an announced reservation (a site's maintenance) takes no job of ours that
would run into the window.

Until the window begins Slurm shows the node idle, and the plan pinned a job whose
walltime crossed it to that node (the tightest fit, ties by name): Slurm did not start it
("ReqNodeNotAvail, May be reserved for other job") and every later plan kept it waiting
through the whole maintenance while an identical node stood idle (user trial on real
Slurm). Work that ends before the window still goes there; a job waiting there that
would run into it is cancelled and placed again where it fits.
"""

from __future__ import annotations

from datetime import timedelta

from controlplane.reconcile import plan
from specs.actions import Op, ReasonCode
from specs.observation import observed_digest
from specs.snapshot import (
    ClusterState,
    Job,
    JobState,
    Node,
    Replica,
    Reservation,
    Snapshot,
)
from tests.builders import NOW, cluster, desired, project, workload

POOLS = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]
MAINT = Reservation(
    name="maint",
    start=NOW + timedelta(minutes=5),
    end=NOW + timedelta(minutes=65),
    maintenance=True,
)


def _world(
    window: Reservation | None = MAINT, *, both: bool = False, **spec: object
) -> tuple[object, Snapshot]:
    """Two idle 8-GPU nodes; a100-01 (``both``: each) under ``window``; workload ``a`` of
    4 GPUs with ``spec``."""
    d = desired([cluster(pools=POOLS), project("p", gpus=16), workload("a", "p", gpus=4, **spec)])
    nodes = [Node(name=f"a100-0{i}", pool="a100", gpu_type="a100_80", gpus=8) for i in (1, 2)]
    for node in nodes if both else nodes[:1]:
        node.reservations = [window] if window else []
    return d, Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes)])


def _submitted_on(d: object, snap: Snapshot) -> list[str | None]:
    p = plan(d, snap, now=NOW)  # type: ignore[arg-type]
    [submit] = [a for a in p.actions if a.op == Op.SUBMIT]
    return [r.node for r in submit.replicas or []]


def test_a_job_that_would_run_into_the_window_goes_to_the_node_without_one() -> None:
    assert _submitted_on(*_world(walltime="10m")) == ["a100-02"]


def test_a_job_without_walltime_goes_to_the_node_without_one() -> None:
    assert _submitted_on(*_world()) == ["a100-02"]


def test_a_job_that_ends_before_the_window_may_still_go_there() -> None:
    assert _submitted_on(*_world(walltime="4m")) == ["a100-01"]
    assert _submitted_on(*_world(walltime="5m")) == ["a100-01"]  # ends as the window opens


def test_a_window_that_has_ended_changes_nothing() -> None:
    past = Reservation(name="old", start=NOW - timedelta(hours=2), end=NOW - timedelta(hours=1))
    assert _submitted_on(*_world(past, walltime="10m")) == ["a100-01"]


def test_a_window_under_way_takes_the_node_out_even_if_it_shows_idle() -> None:
    now = Reservation(name="now", start=NOW - timedelta(minutes=1), end=NOW + timedelta(hours=1))
    assert _submitted_on(*_world(now, walltime="1m")) == ["a100-02"]


def test_a_job_no_node_can_take_in_time_waits_and_says_why() -> None:
    d, snap = _world(walltime="10m", both=True)
    p = plan(d, snap, now=NOW)  # type: ignore[arg-type]
    assert p.actions == []
    [waiting] = p.pending
    assert waiting.reason.code == ReasonCode.NO_CAPACITY
    assert waiting.reason.message.endswith(
        "; nodes a100-01, a100-02 are reserved for maintenance from 2026-11-22T10:05:00Z to "
        "2026-11-22T11:05:00Z, which its 10m walltime would run into"
    ), waiting.reason.message


def test_a_job_waiting_on_the_node_that_it_would_run_into_the_window_is_placed_again() -> None:
    """The plan before the maintenance was announced pinned it to a100-01; Slurm keeps it
    pending there (ReqNodeNotAvail). It is cancelled and submitted on a100-02."""
    d, snap = _world(walltime="10m")
    snap.clusters[0].jobs = [
        Job(
            id="1",
            workload="p/a",
            state=JobState.PENDING,
            submitted_at=NOW - timedelta(minutes=1),
            replicas=[Replica(node="a100-01", gpus=4)],
            plan_id="abc",
            pool="a100",
            walltime=600,
            reason="ReqNodeNotAvail, May be reserved for other job",
            spec_digest=d.workloads["p/a"].spec.digest,  # type: ignore[attr-defined]
        )
    ]
    p = plan(d, snap, now=NOW)  # type: ignore[arg-type]
    assert [(a.op, a.job) for a in p.actions] == [(Op.SUBMIT, None), (Op.CANCEL, "1")]
    submit, cancel = p.actions
    assert [r.node for r in submit.replicas or []] == ["a100-02"]
    assert cancel.reason.code == ReasonCode.NO_CAPACITY
    assert "a100-01 is reserved for maintenance from 2026-11-22T10:05:00Z" in cancel.reason.message
    assert "cancelled" in cancel.reason.message
    # one that ends before the window waits on: Slurm starts it
    snap.clusters[0].jobs[0].walltime = 240
    assert plan(d, snap, now=NOW).actions == []  # type: ignore[arg-type]


def test_an_announced_window_makes_a_plan_stale_and_old_snapshots_keep_their_digest() -> None:
    _, bare = _world(None)
    _, reserved = _world()
    assert observed_digest(bare) != observed_digest(reserved)
    assert "reservations" not in bare.model_dump_json(by_alias=True)
    again = Snapshot.model_validate_json(reserved.model_dump_json(by_alias=True))
    assert again == reserved
