"""Per-GPU-type quotas are divided per type, as KAI divides each resource separately:
where the sum view and the per-type view disagree, the per-type view wins."""

from __future__ import annotations

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
