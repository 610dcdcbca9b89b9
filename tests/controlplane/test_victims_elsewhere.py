"""Victims a plan places again elsewhere (user trial, high). A job runs on one cluster and
moves within it: a victim that can run again only on another cluster is evicted there and
submitted anew here (it had been a ``move`` on its own cluster to the other's nodes: the
simulator restarted it in place on a node of the same name, and the reclaimer's submit
failed, every cycle). A running fan-out job the cluster placed is evicted, and its
workload's new candidates are submitted: the eviction and the new candidate had been
merged into a ``move`` without nodes, which no apply can carry out."""

from __future__ import annotations

from datetime import timedelta

from adapters.simulator import SimulatedCluster
from controlplane.plan import Plan, execution_order
from controlplane.reconcile import plan
from specs.actions import Op
from specs.snapshot import ClusterState, Job, JobState, Node, Replica, Snapshot
from tests.builders import NOW, cluster, desired, pool, project, workload


def _nodes(pool_name: str, count: int, gpus: int) -> list[Node]:
    return [
        Node(name=f"{pool_name}-{i:02d}", pool=pool_name, gpus=gpus) for i in range(1, count + 1)
    ]


def _running(workload_key: str, node: str, gpus: int, pool_name: str, **extra: object) -> Job:
    return Job(
        id="1000",
        workload=workload_key,
        state=JobState.RUNNING,
        replicas=[Replica(node=node, gpus=gpus)],
        pool=pool_name,
        started_at=NOW - timedelta(hours=1),
        **extra,  # type: ignore[arg-type]
    )


def _applied(snap: Snapshot, made: Plan) -> Snapshot:
    """The plan carried out on simulators of the snapshot's clusters, in the order apply
    runs it (each refuses what no cluster could: a node it has not got, GPUs over a node's)."""
    world = Snapshot.model_validate(snap.model_dump())
    for state in world.clusters:
        mine = [a for a in execution_order(made.actions) if a.cluster == state.name]
        SimulatedCluster(state, schedule=False).execute_many(mine, plan_id=made.id, now=NOW)
    return world


def test_a_victim_that_fits_only_on_another_cluster_is_evicted_and_submitted_there() -> None:
    state = desired(
        [
            cluster("east", pools=[pool(nodes=2)]),
            cluster("west", pools=[pool(nodes=1)]),
            project("chem", gpus=0),
            project("bio", gpus=16),
            workload("any", "chem", gpus=8, walltime="6h"),
            workload("g", "bio", gpus=8, replicas=2, clusters=["east"], walltime="2h"),
        ]
    )
    snap = Snapshot(
        now=NOW,
        clusters=[
            ClusterState(
                name="east",
                nodes=_nodes("a100", 2, 8),
                jobs=[_running("chem/any", "a100-01", 8, "a100")],
            ),
            ClusterState(name="west", nodes=_nodes("a100", 1, 8)),  # its node: also a100-01
        ],
    )
    made = plan(state, snap, now=NOW)
    ops = sorted((a.op.value, a.workload, a.cluster) for a in made.actions)
    assert ops == [
        ("preempt", "chem/any", "east"),
        ("submit", "bio/g", "east"),
        ("submit", "chem/any", "west"),
    ], made.actions
    after = _applied(snap, made)
    runs = {(c.name, j.workload) for c in after.clusters for j in c.jobs if j.state.holds_gpus}
    assert runs == {("east", "bio/g"), ("west", "chem/any")}


def test_a_running_fan_out_job_is_evicted_and_its_new_candidates_submitted() -> None:
    fan_out = {"strategy": {"fanOut": True, "maxParallel": 2}, "walltime": "4h"}
    state = desired(
        [
            cluster("east", pools=[pool("v100", gpu_type="v100", gpus_per_node=4, nodes=2)]),
            project("chem", gpus=0),
            project("bio", gpus=8),
            workload("md-run", "chem", gpus=4, **fan_out),
            workload("vg", "bio", gpus=4, replicas=2, walltime="2h"),
        ]
    )
    snap = Snapshot(
        now=NOW,
        clusters=[
            ClusterState(
                name="east",
                nodes=_nodes("v100", 2, 4),
                jobs=[
                    _running("chem/md-run", "v100-01", 4, "v100", candidate="east.v100.1x4.direct")
                ],
            )
        ],
    )
    made = plan(state, snap, now=NOW)
    assert not [a for a in made.actions if a.op is Op.MOVE], made.actions
    ops = sorted((a.op.value, a.workload) for a in made.actions)
    assert ("preempt", "chem/md-run") in ops and ("submit", "bio/vg") in ops, ops
    for a in made.actions:
        assert a.op is not Op.MOVE or all(r.node for r in a.replicas or []), a
    waits = {p.workload: p.reason.message for p in made.pending}
    assert "virtual-" not in waits.get("chem/md-run", ""), waits
    after = _applied(snap, made)
    assert {j.workload for c in after.clusters for j in c.jobs if j.state.holds_gpus} == {"bio/vg"}


def test_a_victim_put_back_home_is_submitted_on_its_home_cluster() -> None:
    """Found by the two-cluster property: p1/w4, started by this plan on west, was a
    candidate victim of a reclaim whose simulation placed it again on east; the victim then
    went back to its west nodes, but the session kept east as its pool, and its submit
    named east's node of the same name (over-committing it: 10 GPUs on an 8-GPU node)."""
    fan_out = {"strategy": {"fanOut": True, "maxParallel": 2}, "walltime": "4h"}
    state = desired(
        [
            cluster("east", pools=[pool(nodes=2)]),
            cluster("west", pools=[pool(nodes=1)]),
            project("p0", gpus=1),
            project("p1", gpus=0),
            workload("w0", "p1", gpus=1),
            workload("w1", "p0", gpus=1, **fan_out),
            workload("w2", "p0", gpus=1),
            workload("w3", "p0", gpus=8, replicas=2),
            workload("w4", "p1", gpus=4, replicas=2),
        ]
    )
    snap = Snapshot(
        now=NOW,
        clusters=[
            ClusterState(name="east", nodes=_nodes("a100", 2, 8)),
            ClusterState(name="west", nodes=_nodes("a100", 1, 8)),
        ],
    )
    made = plan(state, snap, now=NOW)
    used: dict[tuple[str, str], int] = {}
    for a in made.actions:
        for r in a.replicas or []:
            if r.node is not None:
                used[(a.cluster, r.node)] = used.get((a.cluster, r.node), 0) + r.gpus
    assert all(gpus <= 8 for gpus in used.values()), used
    _applied(snap, made)
