"""Reconcile-level policy: the better of KAI's greedy and CP-SAT, one replica per node on
Slurm, time-based fairshare (usage with decay bends only the over-quota split), budgets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from adapters.simulator import nodes_from_spec
from controlplane.reconcile import plan
from solvers.policy import Policy
from specs.snapshot import ClusterState, Job, JobState, Replica, Snapshot, UsageRecord
from tests.builders import NOW, cluster, desired, project, workload

TWO_TYPES = [
    {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 4, "nodes": 1},
    {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "nodes": 1},
]


def empty(d, usage=()):  # type: ignore[no-untyped-def]
    nodes = [n for c in d.clusters.values() for n in nodes_from_spec(c)]
    return Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes)], usage=list(usage))


def test_cpsat_answer_kept_when_it_scores_higher() -> None:
    # the greedy gives the flexible job the first node by name (A100) and strands the
    # job that can only use A100s; CP-SAT places both
    d = desired(
        [
            cluster(pools=TWO_TYPES),
            project("hi", gpus=4, rank=110),
            project("lo", gpus=4),
            workload("flex", "hi", gpus=4, type="interactive", gpuTypes=["a100_80", "v100"]),
            workload("picky", "lo", gpus=4, type="interactive", gpuTypes=["a100_80"]),
        ]
    )
    best = plan(d, empty(d), now=NOW)
    assert best.solver.engine == "cp-sat" and best.solver.status == "OPTIMAL"
    assert {(a.workload, a.pool) for a in best.actions} == {
        ("hi/flex", "v100"),
        ("lo/picky", "a100"),
    }
    assert best.solver.gap == 0.0
    kai = plan(d, empty(d), now=NOW, policy=Policy(engine="kai"))
    assert [(a.workload, a.pool) for a in kai.actions] == [("hi/flex", "a100")]
    assert [(p.workload, p.reason.code.value) for p in kai.pending] == [("lo/picky", "no-capacity")]


def test_gang_replicas_take_distinct_nodes_on_slurm_pools() -> None:
    pools = [
        {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2, "partition": "gpu"}
    ]
    docs = [project("p", gpus=16), workload("gang", "p", gpus=4, replicas=2)]
    sim = plan(d := desired([cluster(pools=pools), *docs]), empty(d), now=NOW)
    assert [r.node for r in sim.actions[0].replicas or []] == ["a100-01", "a100-01"]  # KAI packs
    slurm = desired([cluster(pools=pools, adapter="slurm"), *docs])
    real = plan(slurm, empty(slurm), now=NOW)
    assert sorted(r.node for r in real.actions[0].replicas or []) == ["a100-01", "a100-02"]


def _split(usage: list[UsageRecord], **fairshare: object) -> dict[str, float]:
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]
    d = desired(
        [
            cluster(pools=pools),
            project("heavy", gpus=2, fairshare=fairshare or None),
            project("light", gpus=2),
            *[workload(f"h{i}", "heavy", gpus=4) for i in range(4)],
            *[workload(f"l{i}", "light", gpus=4) for i in range(4)],
        ]
    )
    p = plan(d, empty(d, usage), now=NOW)
    return {name: q.fair_share for name, q in p.projects.items()}


def test_recent_usage_lowers_the_over_quota_share_only() -> None:
    assert _split([]) == {"heavy": 8, "light": 8}
    recent = [
        UsageRecord(project="heavy", gpu_hours=16 * 24 * 3, ended_at=NOW - timedelta(hours=1))
    ]
    shares = _split(recent, halfLife="7d")
    assert shares["heavy"] < shares["light"] and shares["heavy"] >= 2  # deserved untouched
    assert shares["heavy"] + shares["light"] == 16
    # the same usage long ago has decayed away
    old = [UsageRecord(project="heavy", gpu_hours=16 * 24 * 3, ended_at=NOW - timedelta(days=140))]
    assert _split(old, halfLife="7d") == {"heavy": 8, "light": 8}
    # k = 0: usage is ignored
    assert _split(recent, halfLife="7d", k=0) == {"heavy": 8, "light": 8}


def test_work_held_back_by_its_fair_share_waits_for_fairshare_not_capacity() -> None:
    """Past usage bent heavy's share below light's; heavy's work that waits was told
    `no-capacity` ("wait; or allow more gpuTypes"), never `fairshare` (user trial). Work
    of a project within its fair share that finds no room still waits for capacity."""
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]
    docs = [
        cluster(pools=pools),
        project("heavy", gpus=2, fairshare={"halfLife": "7d"}),
        project("light", gpus=2),
        *[workload(f"h{i}", "heavy", gpus=4) for i in range(4)],
        *[workload(f"l{i}", "light", gpus=4) for i in range(4)],
    ]
    d = desired(docs)
    used = [UsageRecord(project="heavy", gpu_hours=16 * 24 * 30, ended_at=NOW - timedelta(hours=1))]
    p = plan(d, empty(d, used), now=NOW)
    codes = {w.workload: w.reason.code.value for w in p.pending}
    heavy = [w.reason.message for w in p.pending if w.workload.startswith("heavy/")]
    assert heavy and {c for k, c in codes.items() if k.startswith("heavy/")} == {"fairshare"}
    held, fair = p.projects["heavy"].allocated, p.projects["heavy"].fair_share
    assert held + 4 <= 8 < held + 4 + fair, (held, fair)  # even, its next job would start
    assert (
        f"project heavy holds {held:g} GPUs, and its fair share is {fair:g}, bent down by its "
        "past usage (fairshare)"
    ) in heavy[0], heavy[0]
    # no usage: an even split, and what is left over waits for capacity on both sides
    crowded = desired([*docs, workload("l4", "light", gpus=4), workload("h4", "heavy", gpus=4)])
    waiting = {w.reason.code.value for w in plan(crowded, empty(crowded), now=NOW).pending}
    assert waiting == {"no-capacity"}


def test_usage_weighed_by_gpu_type_when_fairshare_is_by_cost() -> None:
    """HPC2N-style billing: an A100 hour (cost 3) weighs three V100 hours (cost 1)."""
    pools = [
        {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2},
        {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "nodes": 4},
    ]

    def heavy_share(gpu_type: str, **fairshare: object) -> float:
        used = [
            UsageRecord(
                project="heavy", gpu_hours=800, gpu_type=gpu_type, ended_at=NOW - timedelta(hours=1)
            )
        ]
        d = desired(
            [
                cluster(pools=pools),
                project("heavy", gpus=2, fairshare={"halfLife": "7d", **fairshare}),
                project("light", gpus=2),
                *[workload(f"h{i}", "heavy", gpus=4) for i in range(8)],
                *[workload(f"l{i}", "light", gpus=4) for i in range(8)],
            ]
        )
        return plan(d, empty(d, used), now=NOW).projects["heavy"].fair_share

    # plain GPU-hours: the type does not matter
    assert heavy_share("a100_80") == heavy_share("v100") < 16
    # by cost: the same hours on A100s cost the project more of its share than on V100s
    assert heavy_share("a100_80", byCost=True) < heavy_share("v100", byCost=True)
    # and V100 hours, cheaper than the cluster's average GPU, weigh less than plain hours
    assert heavy_share("v100", byCost=True) > heavy_share("v100")


def test_a_project_over_its_monthly_budget_starts_nothing_new() -> None:
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1}]
    d = desired(
        [
            cluster(pools=pools),
            project("p", gpus=8, budget={"gpuHoursPerMonth": 100}),
            workload("w", "p", gpus=2),
        ]
    )
    spent = [UsageRecord(project="p", gpu_hours=120, ended_at=NOW - timedelta(hours=2))]
    blocked = plan(d, empty(d, spent), now=NOW)
    assert blocked.actions == []
    assert [(p.workload, p.reason.code.value) for p in blocked.pending] == [("p/w", "over-budget")]
    assert "120 of its 100 GPU-hours for November 2026" in blocked.pending[0].reason.message
    last_month = [UsageRecord(project="p", gpu_hours=120, ended_at=NOW - timedelta(days=30))]
    assert [a.workload for a in plan(d, empty(d, last_month), now=NOW).actions] == ["p/w"]


def test_a_project_over_its_budget_does_not_grow_its_running_elastic_job() -> None:
    """A resize that adds replicas starts new ones. With 8 GPUs freed, the elastic job of a
    project that had spent its budget grew from 1 replica to 4, spending another 12.5
    GPU-hours of a budget already gone (user trial). It keeps what it runs."""
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]
    d = desired(
        [
            cluster(pools=pools),
            project("p", gpus=16, budget={"gpuHoursPerMonth": 2}),
            workload("wide", "p", gpus=4, replicas=3, minReplicas=1),
        ]
    )
    snap = empty(d)
    snap.clusters[0].jobs = [
        Job(
            id="1",
            workload="p/wide",
            state=JobState.RUNNING,
            started_at=NOW - timedelta(hours=1),
            replicas=[Replica(node="a100-01", gpus=4)],
            pool="a100",
            spec_digest=d.workloads["p/wide"].spec.digest,
        )
    ]
    assert [a.op.value for a in plan(d, snap, now=NOW).actions] == ["resize"]  # budget left
    snap.usage = [UsageRecord(project="p", gpu_hours=3, ended_at=NOW - timedelta(hours=1))]
    held = plan(d, snap, now=NOW)
    assert held.actions == [], [(a.op, a.reason.message) for a in held.actions]
    assert held.projects["p"].allocated == 4
    # and says so: the plan read "the clusters match the specs", and explain said nothing
    # of the budget (user trial)
    [waits] = held.pending
    assert (waits.workload, waits.reason.code.value) == ("p/wide", "over-budget")
    assert waits.reason.message.startswith("runs 1 of its 3 replicas: project p used 3 of its 2")
    assert held.projects["p"].pending == 0  # it runs what it needs at least


def test_a_small_budget_is_not_rounded_away() -> None:
    """0.4 GPU-hours used of a 0.05 budget read "used 0 of its 0 GPU-hours" (user trial)."""
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1}]
    d = desired(
        [
            cluster(pools=pools),
            project("p", gpus=8, budget={"gpuHoursPerMonth": 0.05}),
            workload("w", "p", gpus=2),
        ]
    )
    spent = [UsageRecord(project="p", gpu_hours=0.4, ended_at=NOW - timedelta(hours=2))]
    [waits] = plan(d, empty(d, spent), now=NOW).pending
    assert "used 0.4 of its 0.05 GPU-hours" in waits.reason.message, waits.reason.message


def test_budget_months_are_utc_months_whatever_the_clock_s_offset() -> None:
    """``--now 2026-12-01T01:00:00+02:00`` is 23:00 UTC on November 30: the November
    budget still binds (it said "for December 2026", and the reverse offset freed a
    November budget an hour early; user trial)."""
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1}]
    d = desired(
        [
            cluster(pools=pools),
            project("p", gpus=8, budget={"gpuHoursPerMonth": 10}),
            workload("w", "p", gpus=2),
        ]
    )
    november = datetime(2026, 11, 30, 12, tzinfo=UTC)
    spent = [UsageRecord(project="p", gpu_hours=12, ended_at=november)]
    east = datetime(2026, 12, 1, 1, tzinfo=timezone(timedelta(hours=2)))
    blocked = plan(d, empty(d, spent), now=east)
    assert [p.reason.code.value for p in blocked.pending] == ["over-budget"]
    assert "for November 2026" in blocked.pending[0].reason.message
    west = datetime(2026, 11, 30, 20, tzinfo=timezone(timedelta(hours=-5)))  # December, UTC
    assert [a.workload for a in plan(d, empty(d, spent), now=west).actions] == ["p/w"]


def test_cost_budgets_weigh_gpu_types() -> None:
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1}]
    d = desired(
        [
            cluster(pools=pools),
            project("p", gpus=8, budget={"costPerMonth": 300}),
            workload("w", "p", gpus=2),
        ]
    )
    # 3 cost units per A100-hour (builders): 90 A100-hours cost 270, 110 cost 330
    ok = [UsageRecord(project="p", gpu_hours=90, ended_at=NOW, gpu_type="a100_80")]
    spent = [UsageRecord(project="p", gpu_hours=110, ended_at=NOW, gpu_type="a100_80")]
    assert plan(d, empty(d, ok), now=NOW).actions
    assert plan(d, empty(d, spent), now=NOW).pending[0].reason.code.value == "over-budget"


def test_a_workload_may_name_its_node_pools() -> None:
    """Training kept off the interactive partition, though it has the room and is cheaper."""
    pools = [
        {"name": "interactive", "gpuType": "v100", "gpusPerNode": 4, "nodes": 2},
        {"name": "batch", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1},
    ]
    d = desired(
        [
            cluster(pools=pools),
            project("p", gpus=16),
            workload("train", "p", gpus=4, nodePools=["batch"]),
            workload("fan", "p", gpus=4, nodePools=["batch"], strategy={"fanOut": True}),
            workload("free", "p", gpus=4),
        ]
    )
    p = plan(d, empty(d), now=NOW)
    where = {a.workload: a.pool for a in p.actions}
    assert where["p/train"] == "batch" and where["p/fan"] == "batch"  # its candidates too
    assert where["p/free"] in ("batch", "interactive")
    # no room left in its pool: it waits rather than take the interactive one
    d2 = desired(
        [
            cluster(pools=pools),
            project("p", gpus=16),
            *[workload(f"t{i}", "p", gpus=4, nodePools=["batch"]) for i in range(3)],
        ]
    )
    p2 = plan(d2, empty(d2), now=NOW)
    assert sorted(a.pool for a in p2.actions) == ["batch", "batch"]
    [waits] = p2.pending
    assert waits.workload == "p/t2" and waits.reason.code.value == "no-capacity"


def test_no_capacity_counts_the_nodes_that_take_no_work() -> None:
    """A pool with half its nodes drained said "eligible pools a100 have 0 free (largest
    block 0 on one node)", and nothing of the drained nodes, which were the reason (user
    trial on Slurm). The reason counts them, with both allocators."""
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]
    d = desired([cluster(pools=pools), project("p", gpus=16), workload("w", "p", gpus=8)])
    snap = empty(d)
    first, second = snap.clusters[0].nodes
    drained = first.model_copy(update={"state": "drain"})
    busy = Job(id="9", workload=None, replicas=[Replica(node=second.name, gpus=8)], started_at=NOW)
    snap = Snapshot(
        now=NOW, clusters=[ClusterState(name="sim", nodes=[drained, second], jobs=[busy])]
    )
    for engine in ("kai", "best"):
        made = plan(d, snap, now=NOW, policy=Policy(engine=engine))
        [waits] = made.pending
        assert waits.reason.code.value == "no-capacity", engine
        assert (
            "1 node (8 GPUs) there takes no work now (down, drained or reserved)"
            in waits.reason.message
        )
