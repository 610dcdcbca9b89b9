"""Property: a fan-out candidate and the work a plan places never share GPUs.

A candidate is a submit the cluster places: wherever it fits when it arrives, or later
when room appears. Random worlds on the simulator (others' jobs, our candidates already
waiting in the queue, new fan-out and ordinary workloads); the plan is applied in its
execution order, the cluster starting its waiting jobs first (its next scheduling pass)
and again at a random moment in between:
every action must be accepted (the simulator refuses an over-committed node). And the
work the plan places itself must leave every waiting candidate that fits its GPUs.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.simulator import SimulatedCluster, nodes_from_spec
from controlplane.plan import placed_by_cluster
from controlplane.reconcile import plan
from specs.snapshot import ClusterState, Job, JobState, Replica, Snapshot
from tests.builders import NOW, cluster, desired, project, workload

FAN = {"fanOut": True, "maxParallel": 3}


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[dict], Snapshot]:
    pools = [
        {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": draw(st.integers(1, 2))},
        {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "nodes": draw(st.integers(1, 3))},
    ]
    docs = [cluster(pools=pools), project("p", gpus=draw(st.integers(4, 40)))]
    for i in range(draw(st.integers(1, 8))):
        fan = draw(st.booleans())
        gpus = draw(st.sampled_from([1, 2, 4]))
        docs.append(
            workload(
                f"w{i}",
                "p",
                gpus=gpus,
                replicas=draw(st.integers(1, 2)),
                walltime="30m",
                **({"strategy": FAN} if fan else {}),
            )
        )
    d = desired(docs)
    nodes = [n for c in d.clusters.values() for n in nodes_from_spec(c)]
    jobs: list[Job] = []
    for n in nodes:  # the cluster's other users
        held = draw(st.integers(0, n.gpus))
        if held:
            jobs.append(
                Job(id=f"o-{n.name}", workload=None, replicas=[Replica(node=n.name, gpus=held)])
            )
    fan_keys = sorted(k for k, w in d.workloads.items() if w.spec.strategy is not None)
    waiting = draw(st.lists(st.sampled_from(fan_keys), unique=True)) if fan_keys else []
    for i, key in enumerate(waiting):
        spec = d.workloads[key].spec
        pool = draw(st.sampled_from(["a100", "v100"]))
        per_node = 8 if pool == "a100" else 4
        if spec.gpus * spec.replicas > per_node:
            continue
        shape = f"sim.{pool}.1x{spec.gpus * spec.replicas}.direct"
        jobs.append(
            Job(
                id=f"c{i}",
                workload=key,
                state=JobState.PENDING,
                pool=pool,
                candidate=shape,
                replicas=[Replica(node=None, gpus=spec.gpus * spec.replicas)],
                walltime=1800,
            )
        )
    snap = Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=jobs)])
    return docs, snap


@settings()  # the profile's examples (tests/conftest.py)
@given(worlds(), st.integers(0, 100))
def test_candidates_and_placed_work_never_share_gpus(
    world: tuple[list[dict], Snapshot], when: int
) -> None:
    docs, snap = world
    p = plan(desired(docs), snap, now=NOW)
    order = p.execution_order()

    # 1. the whole plan, the cluster starting what waits at once (a real cluster's next
    #    scheduling pass comes before the apply) and again at any moment: all accepted
    sim = SimulatedCluster(snap.clusters[0].model_copy(deep=True))
    sim.refresh(NOW)
    start_waiting_at = when * len(order) // 100
    for i, a in enumerate(order):
        if i == start_waiting_at:
            sim.refresh(NOW)
        result = sim.execute(a, plan_id=p.id, now=NOW)
        assert result.ok, (a.op.value, a.workload, result.message)
    sim.refresh(NOW)
    assert all(sim.used()[n.name] <= n.gpus for n in sim.state.nodes)

    # 2. the work the plan places itself leaves the waiting candidates their GPUs: each
    #    one the cluster would start without the plan still starts after it
    alone = SimulatedCluster(snap.clusters[0].model_copy(deep=True))
    alone.refresh(NOW)
    fitted = {j.id for j in alone.state.jobs if j.state is JobState.RUNNING}
    placed = SimulatedCluster(snap.clusters[0].model_copy(deep=True))
    for a in order:
        if not placed_by_cluster(a):
            assert placed.execute(a, plan_id=p.id, now=NOW).ok
    placed.refresh(NOW)
    cancelled = {a.job for a in p.actions if a.job}
    started = {j.id for j in placed.state.jobs if j.state is JobState.RUNNING}
    assert fitted - cancelled <= started


def test_a_later_round_keeps_the_candidates_where_the_cluster_starts_them() -> None:
    """Found by the property above. Two waiting candidates fit best on a100-02 now (the
    cluster starts them there at its next pass). Round 1 planned around them; round 2,
    on the virtual world with round 1's work on it, found a100-01 tighter, held them
    there, and put a 4-GPU job on a100-02 where the cluster had started them: 11 GPUs on
    an 8-GPU node. A candidate starts on the cluster as it is, so every round holds it
    where the first one did."""
    fan = {"strategy": {"fanOut": True, "maxParallel": 3}}
    docs = [
        cluster(
            "sim",
            pools=[
                {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2},
                {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "nodes": 3},
            ],
        ),
        project("p", gpus=4),
        *(workload(f"w{i}", "p", gpus=1, walltime="30m") for i in (1, 2)),
        *(workload(f"w{i}", "p", gpus=4, walltime="30m") for i in (3, 7)),
        workload("w0", "p", gpus=4, replicas=2, walltime="30m"),
        workload("w4", "p", gpus=1, walltime="30m", **fan),
        workload("w5", "p", gpus=1, replicas=2, walltime="30m", **fan),
        workload("w6", "p", gpus=1, walltime="30m", **fan),
    ]
    state = desired(docs)
    nodes = nodes_from_spec(state.clusters["sim"])
    others = [
        Job(id=f"o-{n}", state=JobState.RUNNING, replicas=[Replica(node=n, gpus=g)])
        for n, g in (("a100-01", 1), ("a100-02", 2))
    ]
    waiting = [
        Job(
            id=f"c{i}",
            workload=w,
            state=JobState.PENDING,
            replicas=[Replica(node=None, gpus=g)],
            pool=pool,
            walltime=1800,
            candidate=f"sim.{pool}.1x{g}.direct",
        )
        for i, (w, g, pool) in enumerate(
            (("p/w4", 1, "a100"), ("p/w5", 2, "a100"), ("p/w6", 1, "v100"))
        )
    ]
    snap = Snapshot(
        now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=others + waiting)]
    )
    p = plan(state, snap, now=NOW)
    sim = SimulatedCluster(snap.clusters[0].model_copy(deep=True))
    sim.refresh(NOW)  # the cluster starts the candidates first
    assert {j.id: j.replicas[0].node for j in sim.state.jobs if j.id in ("c0", "c1")} == {
        "c0": "a100-02",
        "c1": "a100-02",
    }
    for a in p.execution_order():
        result = sim.execute(a, plan_id=p.id, now=NOW)
        assert result.ok, (a.op.value, a.workload, result.message)


def test_the_plans_own_work_never_moves_a_candidate_out_of_its_start() -> None:
    """Found by the property above. Three candidates wait for a100 and all start at the
    cluster's next pass (c0 and c1 on a100-02, c2 on a100-01: every free GPU of both
    nodes). The plan held them there and put three 1-GPU jobs in the 3 GPUs a100-01 had
    left beside c2. Landing before that pass, they made a100-01 the tighter fit for c0:
    c0 started there, c1 on a100-02, and c2 had room nowhere. The cluster places its
    candidates by best fit on the nodes as it finds them, so the plan's own work goes
    only where that pass still starts every candidate it would start without the plan:
    in both engines (with the greedy alone kept to it, CP-SAT's answer did the same)."""
    fan = {"strategy": {"fanOut": True, "maxParallel": 3}}
    docs = [
        cluster(
            "sim",
            pools=[
                {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2},
                {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "nodes": 1},
            ],
        ),
        project("p", gpus=4),
        *(workload(f"w{i}", "p", gpus=1, walltime="30m") for i in (1, 2, 3)),
        *(workload(f"w{i}", "p", gpus=2, replicas=2, walltime="30m", **fan) for i in (0, 5)),
        workload("w4", "p", gpus=1, walltime="30m", **fan),
    ]
    state = desired(docs)
    nodes = nodes_from_spec(state.clusters["sim"])
    others = [
        Job(id=f"o-{n}", state=JobState.RUNNING, replicas=[Replica(node=n, gpus=g)])
        for n, g in (("a100-01", 1), ("a100-02", 3))
    ]
    waiting = [
        Job(
            id=f"c{i}",
            workload=w,
            state=JobState.PENDING,
            replicas=[Replica(node=None, gpus=g)],
            pool="a100",
            walltime=1800,
            candidate=f"sim.a100.1x{g}.direct",
        )
        for i, (w, g) in enumerate((("p/w4", 1), ("p/w0", 4), ("p/w5", 4)))
    ]
    snap = Snapshot(
        now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=others + waiting)]
    )
    p = plan(state, snap, now=NOW)
    alone = SimulatedCluster(snap.clusters[0].model_copy(deep=True))
    alone.refresh(NOW)
    assert {j.id: j.replicas[0].node for j in alone.state.jobs if j.id.startswith("c")} == {
        "c0": "a100-02",
        "c1": "a100-02",
        "c2": "a100-01",
    }
    placed = SimulatedCluster(snap.clusters[0].model_copy(deep=True))
    for a in p.execution_order():  # the plan's own work lands before the cluster's pass
        if not placed_by_cluster(a):
            assert placed.execute(a, plan_id=p.id, now=NOW).ok
    placed.refresh(NOW)
    assert [j.id for j in placed.state.jobs if j.state is JobState.PENDING] == []
    assert {a.workload for a in p.actions} == {"p/w1", "p/w2", "p/w3"}  # all still placed
