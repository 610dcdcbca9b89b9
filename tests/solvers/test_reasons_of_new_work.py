"""The reasons of work a plan starts name only what the plan does to running work.

Within one scheduling cycle, allocate may place a workload that reclaim then takes part
of for another (KAI's order). Shown net, both are just starts: a user trial's first plan
had only submits, yet one read "reclaim of nlp/elastic makes room" and the other
"project nlp holds 17, 5 over its deserved 12; reclaimed for ops/serve", with numbers
from the middle of the cycle. They were recorded in the history as such.
"""

from __future__ import annotations

from datetime import timedelta

from controlplane.reconcile import cycle, plan
from specs.actions import Op
from specs.snapshot import ClusterState, Job, Node, Replica, Snapshot
from tests.builders import NOW, cluster, department, desired, project, workload

POOLS = [
    {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 3},
    {"name": "h100", "gpuType": "h100", "gpusPerNode": 4, "nodes": 3},
]


def test_a_fresh_plan_names_no_reclaim() -> None:
    d = desired(
        [
            cluster(pools=POOLS),
            department("ml", gpus=32),
            project("vision", gpus=12, limit=20, department="ml"),
            project("nlp", gpus=12, department="ml"),
            project("ops", gpus=4, department="ml"),
            workload("resnet", "vision", gpus=8, gpuTypes=["a100_80"]),
            workload("vit", "vision", gpus=2, replicas=2, gpuTypes=["h100"]),
            workload("finetune", "nlp", gpus=8, gpuTypes=["a100_80"]),
            workload("elastic", "nlp", gpus=2, replicas=4, minReplicas=1, gpuTypes=["h100"]),
            workload("tokenize", "nlp", gpus=1, priority=10),
            workload("notebook", "ops", gpus=1, type="interactive"),
            workload("serve", "ops", gpus=1, type="inference", gpuTypes=["h100"]),
        ]
    )
    nodes = [
        Node(name=f"{pool}-0{i}", pool=pool, gpu_type=t, gpus=g)
        for pool, t, g in (("a100", "a100_80", 8), ("h100", "h100", 4))
        for i in (1, 2, 3)
    ]
    p = plan(d, Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes)]), now=NOW)
    assert {a.op for a in p.actions} == {Op.SUBMIT}
    why = {a.workload: a.reason.message for a in p.actions}
    assert not [t for t in why.values() if "reclaim of" in t or "reclaimed for" in t], why
    assert "starts with 3 of 4 replicas: the rest go to ops/serve" in why["nlp/elastic"]
    assert "it goes ahead of nlp/elastic (by fair share)" in why["ops/serve"]


def test_a_later_round_names_no_reclaim_of_what_the_plan_started() -> None:
    """A plan's later rounds run on a virtual world holding the plan's own starts: one
    that took back a replica of such a start for another named it "reclaim of ... makes
    room" too (2 such reasons in the busy 1,000-node plan)."""
    d = desired(
        [
            cluster(pools=POOLS),
            department("ml", gpus=32),
            project("vision", gpus=12, department="ml"),
            project("nlp", gpus=12, department="ml"),
            project("ops", gpus=4, department="ml"),
            workload("vit", "vision", gpus=2, replicas=2, gpuTypes=["h100"]),
            workload("finetune", "nlp", gpus=8, gpuTypes=["a100_80"]),
            workload("elastic", "nlp", gpus=2, replicas=4, minReplicas=1, gpuTypes=["h100"]),
            workload("serve", "ops", gpus=1, type="inference", gpuTypes=["h100"]),
        ]
    )
    nodes = [
        Node(name=f"{pool}-0{i}", pool=pool, gpu_type=t, gpus=g)
        for pool, t, g in (("a100", "a100_80", 8), ("h100", "h100", 4))
        for i in (1, 2, 3)
    ]

    def job(key: str, on: list[str], gpus: int) -> Job:
        return Job(
            id=f"virtual-{key}",
            workload=key,
            started_at=NOW - timedelta(minutes=1),
            replicas=[Replica(node=n, gpus=gpus) for n in on],
            pool=on[0][:4],
            spec_digest=d.workloads[key].spec.digest,
        )

    jobs = [
        job("vision/vit", ["h100-03", "h100-03"], 2),
        job("nlp/finetune", ["a100-01"], 8),
        job("nlp/elastic", ["h100-01", "h100-01", "h100-02", "h100-02"], 2),
    ]
    world = Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=jobs)])
    for started, words in (
        (None, "reclaim of nlp/elastic"),
        (frozenset(), "goes ahead of nlp/elastic"),
    ):
        made = cycle(d, world, now=NOW, started=started).finish()
        [serve] = [a for a in made.actions if a.workload == "ops/serve"]
        assert words in serve.reason.message, (started, serve.reason.message)


def test_a_move_that_leaves_replicas_behind_says_so() -> None:
    """An elastic job moved to make room kept fewer replicas where it landed; the plan and
    the history said only "moved from v100-01, v100-01 to a100-01" (user trial)."""
    pools = [
        {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1},
        {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "nodes": 1},
    ]
    d = desired(
        [
            cluster(pools=pools),
            project("f", gpus=8),
            project("p", gpus=0),
            project("q", gpus=4),
            workload("filler", "f", gpus=6, gpuTypes=["a100_80"]),
            workload("burnin", "p", gpus=2, replicas=3, minReplicas=1),
            workload("vw", "q", gpus=1, replicas=3, minReplicas=3, gpuTypes=["v100"]),
        ]
    )
    nodes = [
        Node(name="a100-01", pool="a100", gpu_type="a100_80", gpus=8),
        Node(name="v100-01", pool="v100", gpu_type="v100", gpus=4),
    ]
    jobs = [
        Job(id="1", workload="f/filler", started_at=NOW - timedelta(hours=1), pool="a100",
            replicas=[Replica(node="a100-01", gpus=6)], spec_digest=d.workloads["f/filler"].spec.digest),
        Job(id="2", workload="p/burnin", started_at=NOW - timedelta(hours=1), pool="v100",
            replicas=[Replica(node="v100-01", gpus=2)] * 2, spec_digest=d.workloads["p/burnin"].spec.digest),
    ]  # fmt: skip
    p = plan(
        d, Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=jobs)]), now=NOW
    )
    [move] = [a for a in p.actions if a.workload == "p/burnin"]
    assert move.op == Op.MOVE and len(move.replicas or []) == 1
    assert "with 1 of its 2 replicas" in move.reason.message, move.reason.message


def test_a_lowered_limit_names_the_work_min_runtime_keeps() -> None:
    """Limit 8 -> 2 with 4 of the GPUs inside minRuntime: the preempt read "taken back
    down to it" while 4 stayed, and nothing named minRuntime or when it ends (user trial)."""
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1}]
    d = desired(
        [
            cluster(pools=pools),
            project("n", gpus=2, limit=2, minRuntime="20m"),
            workload("old", "n", gpus=4),
            workload("new1", "n", gpus=2),
            workload("new2", "n", gpus=2),
        ]
    )
    node = Node(name="a100-01", pool="a100", gpu_type="a100_80", gpus=8)

    def job(i: str, key: str, gpus: int, age: timedelta) -> Job:
        return Job(id=i, workload=key, started_at=NOW - age, pool="a100",
                   replicas=[Replica(node="a100-01", gpus=gpus)],
                   spec_digest=d.workloads[key].spec.digest)  # fmt: skip

    jobs = [
        job("1", "n/old", 4, timedelta(hours=1)),
        job("2", "n/new1", 2, timedelta(minutes=5)),
        job("3", "n/new2", 2, timedelta(minutes=8)),
    ]
    p = plan(
        d, Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=[node], jobs=jobs)]), now=NOW
    )
    [preempt] = p.actions
    assert preempt.op == Op.PREEMPT and preempt.workload == "n/old"
    until = (NOW + timedelta(minutes=12)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert "taken back to 4" in preempt.reason.message, preempt.reason.message
    assert (
        f"n/new1, n/new2 within minRuntime (until {until} at the earliest)"
        in preempt.reason.message
    )


def test_a_queue_kept_above_its_lowered_limit_says_why_and_until_when() -> None:
    """Limit lowered to 2 while all the project's work is inside minRuntime: the plan read
    "No changes. The clusters match the specs.", nothing said why the project kept 8 GPUs
    or when that ends, and 30 minutes later a plan preempted (user trial). Non-preemptible
    work is never taken back: the queue stays above until it ends."""
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1}]
    d = desired(
        [
            cluster(pools=pools),
            project("n", gpus=2, limit=2, minRuntime="20m"),
            workload("a", "n", gpus=4),
            workload("b", "n", gpus=2),
            workload("c", "n", gpus=2, preemptible=False),
        ]
    )
    node = Node(name="a100-01", pool="a100", gpu_type="a100_80", gpus=8)
    jobs = [
        Job(id=i, workload=key, started_at=NOW - timedelta(minutes=age), pool="a100",
            replicas=[Replica(node="a100-01", gpus=g)], spec_digest=d.workloads[key].spec.digest)
        for i, key, g, age in (("1", "n/a", 4, 5), ("2", "n/b", 2, 8), ("3", "n/c", 2, 60))
    ]  # fmt: skip
    p = plan(
        d, Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=[node], jobs=jobs)]), now=NOW
    )
    assert p.actions == []
    until = (NOW + timedelta(minutes=12)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert p.projects["n"].above_limit == (
        "project n holds 8 GPUs, above its limit of 2: minRuntime keeps n/a, n/b (until "
        f"{until} at the earliest), and a plan after that takes them back; its "
        "non-preemptible work (2 GPUs) is never taken back, and stays until it ends"
    )
    assert p.projects["n"].model_dump(by_alias=True)["aboveLimit"] == p.projects["n"].above_limit
    jobs[0].started_at = jobs[1].started_at = NOW - timedelta(hours=1)
    later = plan(
        d, Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=[node], jobs=jobs)]), now=NOW
    )
    assert {a.workload for a in later.actions} == {"n/a", "n/b"}
    assert later.projects["n"].above_limit is None  # at its limit with what is left (2)
    assert "aboveLimit" not in later.projects["n"].model_dump(by_alias=True, exclude_none=True)


def test_a_victim_taken_from_several_times_is_told_it_held_and_whom_it_gave_to() -> None:
    """An elastic job shrunk 4 -> 1 in one resize, one replica for each of three jobs of
    another project, read "project q holds 2, 1 over its fair share 1; reclaimed for p/j3":
    the figures and the beneficiary of the last of the three reclaims (user trial)."""
    d = desired(
        [
            cluster(pools=[{"name": "a", "gpuType": "a100_80", "gpusPerNode": 4, "nodes": 1}]),
            project("q", gpus=1),
            project("p", gpus=3),
            workload("el", "q", gpus=1, replicas=4, minReplicas=1),
            *[workload(f"j{i}", "p", gpus=1) for i in (1, 2, 3)],
        ]
    )
    node = Node(name="a-01", pool="a", gpu_type="a100_80", gpus=4)
    el = Job(id="1", workload="q/el", started_at=NOW - timedelta(hours=1), pool="a",
             replicas=[Replica(node="a-01", gpus=1)] * 4, spec_digest=d.workloads["q/el"].spec.digest)  # fmt: skip
    p = plan(d, Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=[node], jobs=[el])]), now=NOW)  # fmt: skip
    [shrink] = [a for a in p.actions if a.workload == "q/el"]
    assert shrink.op == Op.RESIZE and len(shrink.replicas or []) == 1
    assert shrink.reason.message == (
        "project p is below its deserved 3 (holds 0); project q holds 4, 3 over its fair "
        "share 1; reclaimed for p/j1, then for p/j2, p/j3"
    ), shrink.reason.message


def test_a_victim_taken_from_twice_for_one_job_names_it_once() -> None:
    """An elastic job shrunk 4 -> 2 for one elastic job of another project, a replica at a
    time, read "reclaimed for p/big, then for p/big": two reclaims, it seemed (user trial)."""
    d = desired(
        [
            cluster(pools=[{"name": "a", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 4}]),
            project("q", gpus=8),
            project("p", gpus=8),
            workload("big", "q", gpus=8, replicas=4, minReplicas=1),
            workload("big", "p", gpus=8, replicas=4, minReplicas=1),
        ]
    )
    nodes = [Node(name=f"a-0{i}", pool="a", gpu_type="a100_80", gpus=8) for i in range(4)]
    big = Job(
        id="1",
        workload="q/big",
        started_at=NOW - timedelta(hours=1),
        pool="a",
        replicas=[Replica(node=n.name, gpus=8) for n in nodes],
        spec_digest=d.workloads["q/big"].spec.digest,
    )
    world = Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=[big])])
    p = plan(d, world, now=NOW)
    [shrink] = [a for a in p.actions if a.workload == "q/big"]
    assert shrink.op == Op.RESIZE and len(shrink.replicas or []) == 2
    assert shrink.reason.message.count("p/big") == 1, shrink.reason.message
    assert shrink.reason.message.endswith("reclaimed for p/big"), shrink.reason.message


def test_work_the_plan_places_then_reclaims_whole_waits_with_the_numbers_it_would_have() -> None:
    """On an empty cluster, allocate placed alpha/hog (3 x 4 GPUs), then reclaim took all of
    it for delta/seg, below its deserved. The plan read: delta/seg "takes room this plan
    first gave alpha/hog", and alpha/hog waited because "project alpha holds 12" (it holds
    nothing: the 12 are what it would hold) "reclaimed for delta/seg" (user trial)."""
    d = desired(
        [
            cluster(pools=[{"name": "a", "gpuType": "a100_80", "gpusPerNode": 4, "nodes": 4}]),
            project("alpha", gpus=4),
            project("gamma", gpus=4),
            project("delta", gpus=6),
            workload("hog", "alpha", gpus=4, replicas=3),
            workload("elastic", "gamma", gpus=1, replicas=4, minReplicas=1),
            workload("seg", "delta", gpus=2),
        ]
    )
    nodes = [Node(name=f"a-0{i}", pool="a", gpu_type="a100_80", gpus=4) for i in (1, 2, 3, 4)]
    p = plan(d, Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes)]), now=NOW)
    why = {a.workload: a.reason.message for a in p.actions}
    assert sorted(why) == ["delta/seg", "gamma/elastic"]
    assert "it goes ahead of alpha/hog (by fair share)" in why["delta/seg"], why
    [hog] = p.pending
    assert hog.workload == "alpha/hog" and hog.reason.code.value == "reclaim"
    assert "project alpha would hold 12 with it, 2 over its fair share 10" in hog.reason.message
    assert hog.reason.message.endswith("delta/seg goes first"), hog.reason.message
    assert "holds 12" not in hog.reason.message


def test_a_victim_moved_for_the_work_is_not_called_reclaimed() -> None:
    """A reclaim that moved its victim (placed again elsewhere, not evicted) still read
    "reclaim of b/small makes room" on the work it placed (user trial)."""
    pools = [
        {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1},
        {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "nodes": 1},
    ]
    d = desired(
        [
            cluster(pools=pools),
            project("a", gpus=4),
            project("b", gpus=4),
            workload("want", "a", gpus=4, gpuTypes=["v100"]),
            workload("small", "b", gpus=2),
            workload("big", "b", gpus=6, gpuTypes=["a100_80"]),
        ]
    )
    nodes = [
        Node(name="a100-01", pool="a100", gpu_type="a100_80", gpus=8),
        Node(name="v100-01", pool="v100", gpu_type="v100", gpus=4),
    ]
    jobs = [
        Job(
            id=id,
            workload=key,
            pool=node[:4],
            replicas=[Replica(node=node, gpus=gpus)],
            started_at=NOW - timedelta(hours=2),
            spec_digest=d.workloads[key].spec.digest,
        )
        for id, key, node, gpus in (("1", "b/small", "v100-01", 2), ("2", "b/big", "a100-01", 6))
    ]
    p = plan(
        d, Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=jobs)]), now=NOW
    )
    ops = {a.workload: a.op for a in p.actions}
    assert ops == {"a/want": Op.SUBMIT, "b/small": Op.MOVE}, ops
    why = {a.workload: a.reason.message for a in p.actions}
    assert "reclaim of" not in why["a/want"], why
    assert "b/small moves to make room (reclaim)" in why["a/want"], why


def test_going_ahead_of_waiting_work_does_not_read_as_a_disruption() -> None:
    """ "it goes ahead of astro/sky-survey (preemption)" read as if that workload was
    preempted, though it never ran (trialO): the words say by what right instead."""
    from solvers.reasons import room_made

    assert room_made("preemption", [], ["astro/sky"]) == "it goes ahead of astro/sky (by priority)"
    assert room_made("reclaim", ["a/run"], ["b/wait"]) == (
        "reclaim of a/run makes room; it goes ahead of b/wait (by fair share)"
    )
