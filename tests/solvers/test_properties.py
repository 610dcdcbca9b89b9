"""Property tests of the pure core: random orgs and clusters, then plan -> apply -> replan.

Invariants: no node over-committed, no limit exceeded on any level, non-preemptible work
within deserved on every level, every waiting workload has a reason, and once a plan is
applied to the simulator the next plan is empty (the allocation is a fixed point).
"""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.simulator import SimulatedCluster, nodes_from_spec
from controlplane.reconcile import plan
from specs.snapshot import ClusterState, Snapshot
from tests.builders import NOW, cluster, department, desired, project, workload


@st.composite
def orgs(draw: st.DrawFn) -> list[dict]:
    pools = [
        {
            "name": "a100",
            "gpuType": "a100_80",
            "gpusPerNode": draw(st.sampled_from([4, 8])),
            "nodes": draw(st.integers(1, 4)),
        },
        {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "nodes": draw(st.integers(0, 3))},
    ]
    docs = [cluster(pools=pools)]
    n_depts = draw(st.integers(0, 2))
    depts = [f"d{i}" for i in range(n_depts)]
    for d in depts:
        dg = draw(st.integers(0, 16))
        docs.append(
            department(
                d,
                gpus=dg,
                weight=draw(st.integers(0, 3)),
                limit=draw(st.one_of(st.none(), st.integers(dg, 32))),
            )
        )
    projects = [f"p{i}" for i in range(draw(st.integers(1, 4)))]
    for p in projects:
        g = draw(st.integers(0, 12))
        docs.append(
            project(
                p,
                gpus=g,
                weight=draw(st.integers(0, 3)),
                limit=draw(st.one_of(st.none(), st.integers(g, 24))),
                department=draw(st.sampled_from([None, *depts])),
                rank=draw(st.sampled_from([90, 100, 110])),
            )
        )
    for i in range(draw(st.integers(1, 12))):
        replicas = draw(st.integers(1, 3))
        docs.append(
            workload(
                f"w{i}",
                draw(st.sampled_from(projects)),
                gpus=draw(st.sampled_from([1, 2, 4])),
                type=draw(st.sampled_from(["training", "training", "interactive", "inference"])),
                replicas=replicas,
                minReplicas=draw(st.integers(1, replicas)),
            )
        )
    return docs


def _apply(snap: Snapshot, p) -> Snapshot:  # type: ignore[no-untyped-def]
    sims = {c.name: SimulatedCluster(c) for c in snap.clusters}
    for a in p.execution_order():
        sims[a.cluster].execute(a, plan_id=p.id, now=snap.now)
    return snap


@settings()  # the profile's examples (tests/conftest.py)
@given(orgs())
def test_plan_apply_replan_invariants(docs: list[dict]) -> None:
    d = desired(docs)
    c = d.clusters["sim"]
    snap = Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes_from_spec(c))])
    first = plan(d, snap, now=NOW)
    snap = _apply(snap, first)

    # no node over-committed
    cap = {n.name: n.gpus for n in snap.clusters[0].nodes}
    used: dict[str, int] = defaultdict(int)
    per_queue: dict[str, int] = defaultdict(int)
    per_queue_np: dict[str, int] = defaultdict(int)
    for j in snap.clusters[0].jobs:
        for r in j.replicas:
            used[r.node or ""] += r.gpus
        wl = d.workloads[j.workload or ""]
        proj = d.projects[wl.spec.project]
        chain = [proj, *_departments(d, proj.spec.department)]
        for q in chain:
            per_queue[q.metadata.name + q.kind] += j.gpus
            if not wl.spec.is_preemptible:
                per_queue_np[q.metadata.name + q.kind] += j.gpus
        # gangs: at least minReplicas, at most replicas, each on one node of one pool
        assert wl.spec.effective_min_replicas <= len(j.replicas) <= wl.spec.replicas
    assert all(used[n] <= cap[n] for n in used), (used, cap)

    # limits and non-preemptible-within-deserved, on every level
    for q in [*d.projects.values(), *d.departments.values()]:
        quota = q.spec.quota
        key = q.metadata.name + q.kind
        if quota.limit is not None:
            assert per_queue[key] <= quota.limit
        assert per_queue_np[key] <= quota.gpus

    # every workload either runs or waits with a reason
    running = {j.workload for j in snap.clusters[0].jobs}
    waiting = {p.workload for p in first.pending}
    assert running | waiting == set(d.workloads)
    assert not running & waiting
    assert all(p.reason.message for p in first.pending)

    # apply-then-replan is empty, and planning is deterministic
    again = plan(d, snap, now=NOW)
    assert again.actions == [], again.actions
    assert plan(d, snap, now=NOW) == again


def _departments(d, name):  # type: ignore[no-untyped-def]
    out = []
    while name is not None and name in d.departments:
        out.append(d.departments[name])
        name = d.departments[name].spec.parent
    return out
