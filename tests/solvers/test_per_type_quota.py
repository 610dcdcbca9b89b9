"""Per-GPU-type quotas are divided per type, as KAI divides each resource separately:
where the sum view and the per-type view disagree, the per-type view wins."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from adapters.simulator import nodes_from_spec
from controlplane.reconcile import plan
from specs.snapshot import ClusterState, Job, Replica, Snapshot
from tests.builders import NOW, cluster, desired, document, workload

POOLS = [
    {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1},
    {"name": "v100", "gpuType": "v100", "gpusPerNode": 8, "nodes": 1},
]


def typed(name: str, **per_type: int) -> dict[str, Any]:
    quota = [{"gpuType": t, "gpus": g} for t, g in per_type.items()]
    return document("Project", name, {"quota": quota})


def world(d: Any, *jobs: Job) -> Snapshot:
    nodes = [n for c in d.clusters.values() for n in nodes_from_spec(c)]
    return Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=list(jobs))])


def test_non_preemptible_work_fits_within_the_deserved_of_its_type() -> None:
    """An A100 quota of 8 does not let non-preemptible work run on V100s "within deserved"."""
    d = desired(
        [
            cluster(pools=POOLS),
            typed("a", a100_80=8),
            workload("infer", "a", gpus=4, type="inference", gpuTypes=["v100"]),
            workload("infer-a100", "a", gpus=4, type="inference", gpuTypes=["a100_80"]),
        ]
    )
    p = plan(d, world(d), now=NOW)
    assert [a.workload for a in p.actions] == ["a/infer-a100"]
    [waits] = p.pending
    assert waits.workload == "a/infer"
    assert waits.reason.code.value == "non-preemptible-over-deserved"
    assert "v100" in waits.reason.message


def test_over_quota_on_one_type_is_reclaimed_though_the_sum_is_within_deserved() -> None:
    """a holds 4 V100 GPUs beyond its V100 deserved (0); its sum (4) is within its sum of
    deserved (8), which must not protect it: b is owed its V100s."""
    d = desired(
        [
            cluster(pools=POOLS),
            typed("a", a100_80=8),
            typed("b", v100=8),
            workload("train", "a", gpus=4, gpuTypes=["v100"]),
            workload("need", "b", gpus=8, gpuTypes=["v100"]),
        ]
    )
    running = Job(
        id="1",
        workload="a/train",
        replicas=[Replica(node="v100-01", gpus=4)],
        started_at=NOW,
        pool="v100",
    )
    p = plan(d, world(d, running), now=NOW)
    assert [(a.op.value, a.workload, a.reason.code.value) for a in p.actions] == [
        ("submit", "b/need", "within-deserved"),
        ("preempt", "a/train", "reclaim"),
    ]
    assert "v100" in p.actions[1].reason.message


def test_the_table_keeps_the_sum_view() -> None:
    d = desired([cluster(pools=POOLS), typed("a", a100_80=8, v100=2)])
    p = plan(d, world(d), now=NOW)
    assert p.projects["a"].deserved == 10


def test_a_type_limit_caps_that_type_even_on_idle_gpus() -> None:
    """A V100 limit of 4 holds although the V100 node is idle and the other type has room."""
    d = desired(
        [
            cluster(pools=POOLS),
            document(
                "Project",
                "a",
                {
                    "quota": [
                        {"gpuType": "a100_80", "gpus": 8},
                        {"gpuType": "v100", "gpus": 0, "limit": 4},
                    ]
                },
            ),
            workload("one", "a", gpus=4, gpuTypes=["v100"]),
            workload("two", "a", gpus=4, gpuTypes=["v100"]),
            workload("any", "a", gpus=4),
        ]
    )
    p = plan(d, world(d), now=NOW)
    placed = {a.workload: a.pool for a in p.actions}
    assert placed == {"a/one": "v100", "a/any": "a100"}
    [waits] = p.pending
    assert waits.workload == "a/two" and waits.reason.code.value == "over-limit"
    assert "v100 limit of 4" in waits.reason.message


def test_cp_sat_answers_keep_to_type_quotas() -> None:
    """Both engines see the same problem; whichever answer is kept obeys per-type quotas."""
    jobs = [workload(f"np{i}", "a", gpus=2, type="inference") for i in range(6)]
    d = desired([cluster(pools=POOLS), typed("a", a100_80=8, v100=2), *jobs])
    p = plan(d, world(d), now=NOW)
    by_pool: dict[str | None, int] = {}
    for a in p.actions:
        by_pool[a.pool] = by_pool.get(a.pool, 0) + 2
    assert by_pool == {"a100": 8, "v100": 2}
    assert len(p.pending) == 1


def test_fan_out_candidates_keep_to_type_quotas() -> None:
    """A non-preemptible fan-out workload may use either type, its project deserves only
    A100s: only A100 candidates are submitted. With the A100 limit used up (the sum still
    has room), only V100 candidates."""
    fan = {"fanOut": True, "maxParallel": 4}
    d = desired(
        [
            cluster(pools=POOLS),
            typed("a", a100_80=4),
            workload("w", "a", gpus=4, type="inference", strategy=fan),
        ]
    )
    p = plan(d, world(d), now=NOW)
    assert p.actions and {a.submit.gpu_type for a in p.actions if a.submit} == {"a100_80"}
    limited = document(
        "Project",
        "a",
        {
            "quota": [
                {"gpuType": "a100_80", "gpus": 4, "limit": 4},
                {"gpuType": "v100", "gpus": 4, "limit": 4},
            ]
        },
    )
    d = desired(
        [
            cluster(pools=POOLS),
            limited,
            workload("held", "a", gpus=4, gpuTypes=["a100_80"]),
            workload("w", "a", gpus=4, strategy=fan),
        ]
    )
    running = Job(
        id="1",
        workload="a/held",
        replicas=[Replica(node="a100-01", gpus=4)],
        started_at=NOW,
        pool="a100",
    )
    p = plan(d, world(d, running), now=NOW)
    assert p.actions and {a.submit.gpu_type for a in p.actions if a.submit} == {"v100"}


def test_a_type_limit_cut_below_what_runs_takes_the_type_back_down() -> None:
    """p's A100 limit is cut to 8 while it runs 12 A100 GPUs (and 4 V100, within their
    limit). Only the total limit was enforced: the plan said nothing, and a fresh plan of
    the same specs would refuse the job it kept running (user trial). The type is taken
    back down to its limit, lowest priority first, and the reason names the type."""
    pools = [
        {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 4, "nodes": 4},
        {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "nodes": 1},
    ]
    quota = [
        {"gpuType": "a100_80", "gpus": 8, "limit": 8},
        {"gpuType": "v100", "gpus": 4, "limit": 8},
    ]
    d = desired(
        [
            cluster(pools=pools),
            document("Project", "p", {"quota": quota}),
            *[
                workload(f"a{i}", "p", gpus=4, priority=10 + i, gpuTypes=["a100_80"])
                for i in range(3)
            ],
            workload("v", "p", gpus=4, priority=1, gpuTypes=["v100"]),
        ]
    )

    def job(key: str, node: str, pool: str) -> Job:
        return Job(
            id=key.replace("/", "-"),
            workload=key,
            replicas=[Replica(node=node, gpus=4)],
            started_at=NOW - timedelta(hours=1),
            pool=pool,
        )

    jobs = [job(f"p/a{i}", f"a100-0{i + 1}", "a100") for i in range(3)]
    p = plan(d, world(d, *jobs, job("p/v", "v100-01", "v100")), now=NOW)
    assert [(a.op.value, a.workload) for a in p.actions] == [("preempt", "p/a0")]
    message = p.actions[0].reason.message
    assert "12 a100_80 GPUs, above its a100_80 limit of 8" in message, message
    assert p.projects["p"].above_limit is None
    # kept by minRuntime: the project says so, by type
    young = [j.model_copy(update={"started_at": NOW - timedelta(minutes=1)}) for j in jobs]
    d2 = desired(
        [
            cluster(pools=pools),
            document("Project", "p", {"quota": quota, "minRuntime": "10m"}),
            *[
                workload(f"a{i}", "p", gpus=4, priority=10 + i, gpuTypes=["a100_80"])
                for i in range(3)
            ],
        ]
    )
    p2 = plan(d2, world(d2, *young), now=NOW)
    assert not p2.actions
    above = p2.projects["p"].above_limit
    assert above is not None and "above its a100_80 limit of 8" in above, above
