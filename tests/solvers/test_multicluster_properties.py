"""Properties of plans over several clusters whose nodes share names (each simulated
cluster names its nodes pool-NN): every action acts on its own cluster's nodes, and the
simulators carry out every plan without refusing a step. A victim placed again on another
cluster had been a ``move`` on its own cluster to the other's node (user trial), and a
running fan-out job evicted a ``move`` without nodes: neither applied."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.simulator import SimulatedCluster
from controlplane.plan import Plan
from controlplane.reconcile import plan
from specs.actions import Op
from specs.desired import DesiredState
from specs.snapshot import Snapshot
from tests.builders import NOW, cluster, desired, pool, project, workload

CLUSTERS = ("east", "west")
POOL = "a100"


@st.composite
def scenes(draw: st.DrawFn) -> tuple[DesiredState, Snapshot]:
    """Two clusters of 1-2 nodes each (the same node names on both), projects over and
    under their quotas, work running on either cluster, some of it pinned to one cluster
    or fanned out, and work waiting."""
    sizes = {
        c: [draw(st.sampled_from([4, 8])) for _ in range(draw(st.integers(1, 2)))] for c in CLUSTERS
    }
    docs: list[dict[str, Any]] = [
        cluster(c, pools=[pool(POOL, gpus_per_node=max(sizes[c]), nodes=len(sizes[c]))])
        for c in CLUSTERS
    ]
    projects = [f"p{i}" for i in range(draw(st.integers(1, 3)))]
    docs += [project(p, gpus=draw(st.integers(0, 12))) for p in projects]
    free = {(c, f"{POOL}-{i + 1:02d}"): g for c in CLUSTERS for i, g in enumerate(sizes[c])}
    jobs: dict[str, list[dict[str, Any]]] = {c: [] for c in CLUSTERS}
    for i in range(draw(st.integers(1, 6))):
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        replicas = draw(st.integers(1, 2))
        spec: dict[str, Any] = {"priority": draw(st.sampled_from([50, 50, 75]))}
        where = draw(st.sampled_from([None, None, *CLUSTERS]))
        if where is not None:
            spec["clusters"] = [where]
        if replicas == 1 and draw(st.integers(0, 3)) == 0:
            spec["strategy"] = {"fanOut": True, "maxParallel": 2}
            spec["walltime"] = "4h"
        key = f"{draw(st.sampled_from(projects))}/w{i}"
        docs.append(workload(f"w{i}", key.split("/")[0], gpus=gpus, replicas=replicas, **spec))
        if not draw(st.booleans()):
            continue  # waiting
        home = where or draw(st.sampled_from(CLUSTERS))
        fits = sorted(n for (c, n), f in free.items() if c == home and f >= gpus)
        if len(fits) < replicas:
            continue
        on = draw(st.permutations(fits))[:replicas]
        for n in on:
            free[(home, n)] -= gpus
        started = NOW - timedelta(minutes=draw(st.sampled_from([5, 300])))
        jobs[home].append(
            {
                "id": f"job-w{i}",
                "workload": key,
                "state": "RUNNING",
                "pool": POOL,
                "submittedAt": started.isoformat(),
                "startedAt": started.isoformat(),
                "replicas": [{"node": n, "gpus": gpus} for n in on],
                **({"candidate": f"{home}.{POOL}.1x{gpus}.direct"} if "strategy" in spec else {}),
            }
        )
    snap = Snapshot.model_validate(
        {
            "now": NOW.isoformat(),
            "clusters": [
                {
                    "name": c,
                    "jobs": jobs[c],
                    "nodes": [
                        {
                            "name": f"{POOL}-{i + 1:02d}",
                            "pool": POOL,
                            "gpuType": "a100_80",
                            "gpus": g,
                        }
                        for i, g in enumerate(sizes[c])
                    ],
                }
                for c in CLUSTERS
            ],
        }
    )
    return desired(docs), snap


def _applied(snap: Snapshot, made: Plan) -> None:
    world = snap.model_copy(deep=True)
    sims = {c.name: SimulatedCluster(c) for c in world.clusters}
    for a in made.execution_order():
        sims[a.cluster].execute(a, plan_id=made.id, now=snap.now)  # raises on a refused step


@settings()
@given(scenes())
def test_every_action_acts_on_its_own_clusters_nodes(scene: tuple[DesiredState, Snapshot]) -> None:
    state, snap = scene
    made = plan(state, snap, now=NOW)
    assert not [c for c in made.solver.cut_short if "refused a step" in c], made.solver.cut_short
    running = {(c.name, j.id): c.name for c in snap.clusters for j in c.jobs}
    for a in made.actions:
        if a.job is not None:
            assert (a.cluster, a.job) in running, f"{a.op} of {a.job}, not a job of {a.cluster}"
        if a.op in (Op.MOVE, Op.RESIZE):
            assert a.replicas and all(r.node for r in a.replicas), a
    _applied(snap, made)
