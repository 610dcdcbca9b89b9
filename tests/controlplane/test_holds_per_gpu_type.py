"""Holds block new work of their GPU type; they do not evict.

A stand-in (controlplane/unreachable.py) is placed on no pool, so it has no GPU type of its
own. Where every pool its workload may use on the cluster that did not answer has one GPU
type, it is charged to that type: a per-GPU-type limit then keeps new work of the type out
as the total limit does (tests/controlplane/test_holds_do_not_evict.py), and, as there, no
running work is taken back, preempted or reclaimed on its account. Where its pools have
several types, nobody can say which it holds: it is charged to none.

Two clusters: ``near`` answers (``a100_80`` nodes of 8), ``far`` does not (``a100_80``
nodes of 8 unless a case says otherwise).
"""

from __future__ import annotations

from typing import Any

from controlplane.reconcile import plan
from specs.actions import ReasonCode
from tests.builders import NOW, cluster, desired, document, pool, project, workload
from tests.controlplane.test_holds_do_not_evict import (
    evictions,
    running,
    waits,
    waits_for_the_stand_in,
)

Doc = dict[str, Any]


def clusters(near_nodes: int = 1, far: list[Doc] | None = None) -> list[Doc]:
    return [
        cluster("near", pools=[pool("a100", nodes=near_nodes)]),
        cluster("far", pools=far or [pool("a100", nodes=2)]),
    ]


def a100(gpus: int, limit: int | None = None) -> list[Doc]:
    """A per-type quota: ``gpus`` of ``a100_80`` (with ``limit``) and none of ``v100``, on
    which no limit is set, so the queue has no limit on its total: only the type's binds."""
    typed: Doc = {"gpuType": "a100_80", "gpus": gpus}
    if limit is not None:
        typed["limit"] = limit
    return [typed, {"gpuType": "v100", "gpus": 0}]


def test_a_type_limit_counts_stand_ins_of_its_type() -> None:
    """p runs 4 a100 GPUs on near and may run 4 more on far, whose pools are all a100: a
    new a100 job on near would put it at 12 of its a100 limit of 8. It waits (it started,
    the stand-in counted by no type)."""
    specs = desired(
        [
            *clusters(near_nodes=2),
            project("p", quota=a100(8, limit=8)),
            workload("run-1", "p", gpus=4, clusters=["near"]),
            workload("on-far", "p", gpus=4, clusters=["far"]),
            workload("new-near", "p", gpus=4, clusters=["near"]),
        ]
    )
    made = plan(specs, running(specs, ("p/run-1", "a100-01", 4)), now=NOW)
    assert made.actions == []
    assert waits(made) == {
        "p/on-far": ReasonCode.CLUSTER_UNREACHABLE,
        "p/new-near": ReasonCode.OVER_LIMIT,
    }
    [why] = [p.reason for p in made.pending if p.workload == "p/new-near"]
    assert "project p holds 8 of its a100_80 limit of 8" in why.message


def test_a_type_limit_stand_ins_fill_takes_nothing_back() -> None:
    """p runs 8 a100 GPUs on near, at its a100 limit, and a stand-in of 4 more: p holds 12
    of its limit 8, but only what the clusters show is brought down to the limit, and that
    is within it."""
    specs = desired(
        [
            *clusters(),
            project("p", quota=a100(8, limit=8)),
            workload("run-1", "p", gpus=4, clusters=["near"]),
            workload("run-2", "p", gpus=4, clusters=["near"]),
            workload("on-far", "p", gpus=4, clusters=["far"]),
        ]
    )
    snap = running(specs, ("p/run-1", "a100-01", 4), ("p/run-2", "a100-01", 4))
    made = plan(specs, snap, now=NOW)
    assert evictions(made) == []
    assert made.actions == []
    assert waits(made) == {"p/on-far": ReasonCode.CLUSTER_UNREACHABLE}
    above = made.projects["p"].above_limit
    assert above is not None and "did not answer" in above


def test_a_type_limit_stand_ins_fill_is_no_reason_to_preempt() -> None:
    """p's high-priority a100 job would preempt its low one to get under the a100 limit that
    low and a stand-in fill: it waits, and low runs on. Without the stand-in, high starts
    beside low."""
    docs = [
        *clusters(),
        project("p", quota=a100(8, limit=8)),
        workload("low", "p", gpus=4, clusters=["near"], priority=50),
        workload("on-far", "p", gpus=4, clusters=["far"]),
        workload("high", "p", gpus=4, clusters=["near"], priority=125),
    ]
    waits_for_the_stand_in(docs, ("p/low", "a100-01", 4), "p/high")


def test_a_department_type_limit_stand_ins_fill_is_no_reason_to_reclaim() -> None:
    """Department d's a100 limit of 8 is filled by q's job on near (beyond q's a100
    deserved of 0) and p's stand-in; r, within its deserved, would reclaim q's job to get
    its new one under d's limit: that room is the stand-in's, so r's job waits. Without
    the stand-in it starts beside q's job."""
    docs = [
        *clusters(),
        document("Department", "d", {"quota": a100(8, limit=8)}),
        project("p", quota=a100(4), department="d"),
        project("q", quota=a100(0), department="d"),
        project("r", quota=a100(4), department="d"),
        workload("on-far", "p", gpus=4, clusters=["far"]),
        workload("q-run", "q", gpus=4, clusters=["near"]),
        workload("r-new", "r", gpus=4, clusters=["near"]),
    ]
    waits_for_the_stand_in(docs, ("q/q-run", "a100-01", 4), "r/r-new")


def test_a_stand_in_whose_type_is_not_known_is_charged_to_none() -> None:
    """far has a100 and v100 pools. A held workload that may use either counts against no
    type's limit (which it holds nobody can say), so new a100 work starts on near; one that
    may use only far's a100 pool counts against the a100 limit."""
    far = [pool("a100", nodes=1), pool("v100", gpu_type="v100", nodes=1)]

    def new_near(held: Doc) -> dict[str, ReasonCode]:
        specs = desired(
            [
                *clusters(near_nodes=2, far=far),
                project("p", quota=a100(8, limit=8)),
                workload("run-1", "p", gpus=4, clusters=["near"]),
                held,
                workload("new-near", "p", gpus=4, clusters=["near"]),
            ]
        )
        made = plan(specs, running(specs, ("p/run-1", "a100-01", 4)), now=NOW)
        assert evictions(made) == []
        return waits(made)

    either = workload("on-far", "p", gpus=4, clusters=["far"])
    assert new_near(either) == {"p/on-far": ReasonCode.CLUSTER_UNREACHABLE}
    only_a100 = workload("on-far", "p", gpus=4, clusters=["far"], gpuTypes=["a100_80"])
    assert new_near(only_a100) == {
        "p/on-far": ReasonCode.CLUSTER_UNREACHABLE,
        "p/new-near": ReasonCode.OVER_LIMIT,
    }
