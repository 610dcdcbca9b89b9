"""Time passing in the simulator: a queued job starts when room appears for it, not when
somebody next looks. A cluster's scheduler starts it the moment a walltime ends or an
apply frees GPUs; the simulator used to start it at the next observation, so after a
`--now` jump (or a quiet night of `cp watch`) its start, its walltime's end and the
project's usage were all late by the jump."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from adapters.simulator import SimulatedCluster, SimulatorAdapter
from specs.actions import Action, Op, Reason, ReasonCode, SubmitDetails
from specs.models import Cluster
from specs.snapshot import ClusterState, Job, JobState, Node, Replica
from tests.builders import NOW, cluster, pool

HOUR = timedelta(hours=1)
WHY = Reason(code=ReasonCode.WITHIN_DESERVED, message="x")


def _queued(job_id: str, workload: str, walltime: int) -> Job:
    return Job(
        id=job_id,
        workload=workload,
        state=JobState.PENDING,
        pool="p",
        submitted_at=NOW,
        walltime=walltime,
        replicas=[Replica(node=None, gpus=4)],
    )


def test_a_queued_job_starts_when_a_walltime_ends_and_may_end_before_the_next_look() -> None:
    running = Job(
        id="1",
        workload="a/first",
        pool="p",
        started_at=NOW,
        submitted_at=NOW,
        walltime=3600,
        replicas=[Replica(node="n0", gpus=4)],
    )
    jobs = [running, _queued("2", "a/second", 2 * 3600), _queued("3", "a/third", 10 * 3600)]
    sim = SimulatedCluster(
        ClusterState(name="c", nodes=[Node(name="n0", pool="p", gpus=4)], jobs=jobs)
    )
    sim.refresh(NOW + 5 * HOUR)  # one look, five hours on
    seen = {j.id: (j.state, j.started_at, j.ended_at) for j in sim.state.jobs}
    assert seen == {
        "1": (JobState.COMPLETED, NOW, NOW + HOUR),
        "2": (JobState.COMPLETED, NOW + HOUR, NOW + 3 * HOUR),  # ran in the room 1 left
        "3": (JobState.RUNNING, NOW + 3 * HOUR, None),  # and 3 in the room 2 left
    }
    gpu_hours = sum(
        r.gpus * ((r.ended_at or NOW + 5 * HOUR) - r.started_at) / HOUR
        for r in sim.runs(NOW, NOW + 5 * HOUR)
    )
    assert gpu_hours == 4 * 5  # the node was busy all along


def test_a_queued_job_starts_when_the_apply_that_frees_its_room_ends(tmp_path: Path) -> None:
    """The last action of an apply frees the room (nothing after it looks at the cluster);
    the next observation, hours later, finds the queued job started back then."""
    spec = Cluster.model_validate(cluster("c", pools=[pool("a100", nodes=1, gpus_per_node=8)]))
    clock = [NOW]
    sim = SimulatorAdapter(spec, state_dir=tmp_path, clock=lambda: clock[0])
    [node] = [n.name for n in sim.observe().nodes]

    def submit(workload: str, where: str | None) -> Action:
        return Action(
            op=Op.SUBMIT,
            workload=workload,
            cluster="c",
            pool="a100",
            replicas=[Replica(node=where, gpus=8)],
            submit=SubmitDetails(gpus_per_replica=8, gpu_type="a100_80"),
            reason=WHY,
        )

    first = sim.execute(submit("p/first", node), plan_id="x")
    assert sim.execute(submit("p/waits", None), plan_id="x").message == "queued"
    clock[0] = NOW + HOUR
    cancel = Action(op=Op.PREEMPT, workload="p/first", cluster="c", job=first.job, reason=WHY)
    assert sim.execute(cancel, plan_id="y").ok
    clock[0] = NOW + 6 * HOUR
    [waited] = [j for j in sim.observe().jobs if j.workload == "p/waits"]
    assert (waited.state, waited.started_at) == (JobState.RUNNING, NOW + HOUR)


def test_a_node_the_spec_adds_takes_queued_work_from_when_it_is_seen(tmp_path: Path) -> None:
    """Time is caught up on the hardware the state was saved with; a node the spec adds
    meanwhile is there from the observation that first sees it, not from the last save."""
    one = Cluster.model_validate(cluster("c", pools=[pool("a100", nodes=1, gpus_per_node=8)]))
    clock = [NOW]
    sim = SimulatorAdapter(one, state_dir=tmp_path, clock=lambda: clock[0])
    [node] = [n.name for n in sim.observe().nodes]
    ask = SubmitDetails(gpus_per_replica=8, gpu_type="a100_80")
    for name, where in (("p/runs", node), ("p/waits", None)):
        action = Action(
            op=Op.SUBMIT,
            workload=name,
            cluster="c",
            pool="a100",
            replicas=[Replica(node=where, gpus=8)],
            submit=ask,
            reason=WHY,
        )
        assert sim.execute(action, plan_id="x").ok
    two = Cluster.model_validate(cluster("c", pools=[pool("a100", nodes=2, gpus_per_node=8)]))
    clock[0] = NOW + 3 * HOUR
    seen = SimulatorAdapter(two, state_dir=tmp_path, clock=lambda: clock[0]).observe()
    [waited] = [j for j in seen.jobs if j.workload == "p/waits"]
    assert (waited.state, waited.started_at) == (JobState.RUNNING, NOW + 3 * HOUR)
