"""Holds block new work; they do not evict.

A cluster that does not answer, observed with nothing known of what may run there (no
``lastKnown``: ``cp plan --observed`` on a snapshot written without a store), holds every
workload that may use it as a stand-in (controlplane/unreachable.py): its GPUs count
against its project and departments, so nothing new starts beyond a limit or quota they
may be using. But a stand-in may stand for work that was never submitted: no running work
on a cluster that answered may be taken back, preempted or reclaimed on its account. The
lifetime property test found the first of these (its "east silent" incident): a limit
enforced against stand-ins' GPUs preempted running work on the other cluster.

Two clusters: ``near`` answers (one node of 8 ``a100_80``), ``far`` does not (8 ``v100``
per node). Every case is planned twice: against the snapshot, and against the same
snapshot without the held workloads (the world as it would be without the stand-ins),
which must evict nothing either.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.simulator import nodes_from_spec
from controlplane.plan import Plan
from controlplane.reconcile import plan
from specs.actions import Op, ReasonCode
from specs.desired import DesiredState
from specs.snapshot import ClusterState, Snapshot
from tests.builders import NOW, cluster, department, desired, pool, project, workload
from tests.builders.cli import cp, ok, write_specs

Doc = dict[str, Any]
EVICTING = {Op.PREEMPT, Op.CANCEL, Op.RESIZE, Op.MOVE}
STARTED = (NOW - timedelta(hours=1)).isoformat()


def clusters(near_nodes: int = 1) -> list[Doc]:
    return [
        cluster("near", pools=[pool("a100", nodes=near_nodes)]),
        cluster("far", pools=[pool("v100", gpu_type="v100", gpus_per_node=8, nodes=2)]),
    ]


def running(specs: DesiredState, *jobs: tuple[str, str, int]) -> Snapshot:
    """``near`` running ``jobs`` (workload, node, GPUs), each a job of one replica; ``far``
    silent with nothing known of it."""
    nodes = [n.model_dump() for n in nodes_from_spec(specs.clusters["near"])]
    seen = [
        {
            "id": str(i),
            "workload": key,
            "state": "RUNNING",
            "startedAt": STARTED,
            "replicas": [{"node": node, "gpus": gpus}],
        }
        for i, (key, node, gpus) in enumerate(jobs, start=1)
    ]
    near = ClusterState.model_validate({"name": "near", "nodes": nodes, "jobs": seen})
    far = ClusterState(name="far", reachable=False, error="TemporaryError: connection refused")
    return Snapshot(now=NOW, clusters=[near, far])


def evictions(made: Plan) -> list[tuple[Op, str | None]]:
    return [(a.op, a.workload) for a in made.actions if a.op in EVICTING]


def waits(made: Plan) -> dict[str, ReasonCode]:
    return {p.workload: p.reason.code for p in made.pending}


def waits_for_the_stand_in(docs: list[Doc], run: tuple[str, str, int], waiting: str) -> None:
    """With ``run`` running on near and on-far held for far, nothing happens and
    ``waiting`` waits over a limit; without the stand-in, ``waiting`` starts beside it."""
    specs = desired(docs)
    made = plan(specs, running(specs, run), now=NOW)
    assert evictions(made) == [] and made.actions == []
    assert waits(made) == {
        "p/on-far": ReasonCode.CLUSTER_UNREACHABLE,
        waiting: ReasonCode.OVER_LIMIT,
    }
    alone = desired([d for d in docs if d["metadata"]["name"] != "on-far"])
    started = plan(alone, running(alone, run), now=NOW)
    assert [(a.op, a.workload) for a in started.actions] == [(Op.SUBMIT, waiting)]


def test_a_limit_is_not_enforced_against_stand_ins() -> None:
    """p runs 8 GPUs on near, at its limit; two workloads that may use far were never
    submitted anywhere, but nothing says so: held, they put p at 16 of its limit 8. The
    plan took p's running work on near back "down to the limit" for them."""
    specs = desired(
        [
            *clusters(),
            project("p", gpus=8, limit=8),
            workload("run-1", "p", gpus=4, clusters=["near"]),
            workload("run-2", "p", gpus=4, clusters=["near"]),
            workload("may-far", "p", gpus=4),  # any GPU type: near or far
            workload("on-far", "p", gpus=4, clusters=["far"]),
        ]
    )
    made = plan(
        specs, running(specs, ("p/run-1", "a100-01", 4), ("p/run-2", "a100-01", 4)), now=NOW
    )
    assert evictions(made) == []
    assert made.actions == []
    assert waits(made) == {
        "p/may-far": ReasonCode.CLUSTER_UNREACHABLE,
        "p/on-far": ReasonCode.CLUSTER_UNREACHABLE,
    }
    p = made.projects["p"]
    assert (p.held, p.allocated, p.unreachable) == (16, 16, 8)
    assert p.above_limit is not None and "did not answer" in p.above_limit


def test_stand_ins_still_keep_new_work_out() -> None:
    """The same stand-ins keep work that may start on near from starting beyond the limit
    they may be using: the hold blocks."""
    specs = desired(
        [
            *clusters(near_nodes=2),
            project("p", gpus=8, limit=8),
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


def test_what_real_work_holds_above_a_limit_is_still_taken_back() -> None:
    """p's limit was lowered to 8 while it runs 12 GPUs on near, and a held workload may be
    on far: the 4 GPUs real work holds above the limit are taken back, not 8."""
    specs = desired(
        [
            *clusters(near_nodes=2),
            project("p", gpus=8, limit=8),
            workload("run-1", "p", gpus=4, clusters=["near"]),
            workload("run-2", "p", gpus=4, clusters=["near"]),
            workload("run-3", "p", gpus=4, clusters=["near"], priority=40),
            workload("on-far", "p", gpus=4, clusters=["far"]),
        ]
    )
    snap = running(
        specs, ("p/run-1", "a100-01", 4), ("p/run-2", "a100-01", 4), ("p/run-3", "a100-02", 4)
    )
    made = plan(specs, snap, now=NOW)
    assert evictions(made) == [(Op.PREEMPT, "p/run-3")]
    [taken] = [a for a in made.actions if a.workload == "p/run-3"]
    assert taken.reason.code is ReasonCode.RECLAIM
    assert "12 GPUs on the clusters that answered, above its limit of 8" in taken.reason.message
    assert "4 more held for clusters that did not answer" in taken.reason.message


def test_a_limit_stand_ins_fill_is_no_reason_to_preempt() -> None:
    """Department d is at its limit 8 through p's low-priority job on near and a stand-in;
    p's high-priority job would preempt the low one to get under the limit. The room it
    lacks is what the stand-in holds: it waits, and the low one runs on."""
    docs = [
        *clusters(),
        department("d", gpus=8, limit=8),
        project("p", gpus=8, department="d"),
        workload("low", "p", gpus=4, clusters=["near"], priority=50),
        workload("on-far", "p", gpus=4, clusters=["far"]),
        workload("high", "p", gpus=4, clusters=["near"], priority=125),
    ]
    waits_for_the_stand_in(docs, ("p/low", "a100-01", 4), "p/high")


def test_stand_ins_do_not_make_their_project_a_reclaim_victim() -> None:
    """p runs its deserved 4 GPUs on near, and a stand-in of 4 more puts it above its
    deserved: q, within its own deserved 8, reclaimed p's running job for its waiting
    one. Without the stand-in p holds no more than it deserves: near is full, q waits."""
    specs = desired(
        [
            *clusters(),
            project("p", gpus=4),
            project("q", gpus=8),
            workload("real", "p", gpus=4, clusters=["near"]),
            workload("on-far", "p", gpus=4, clusters=["far"]),
            workload("q-run", "q", gpus=4, clusters=["near"]),
            workload("q-new", "q", gpus=4, clusters=["near"]),
        ]
    )
    made = plan(specs, running(specs, ("p/real", "a100-01", 4), ("q/q-run", "a100-01", 4)), now=NOW)
    assert evictions(made) == []
    assert made.actions == []
    assert waits(made) == {
        "p/on-far": ReasonCode.CLUSTER_UNREACHABLE,
        "q/q-new": ReasonCode.NO_CAPACITY,
    }


def test_stand_ins_take_no_fair_share_from_work_that_runs() -> None:
    """Nobody deserves anything; q runs 8 a100 GPUs on near (all its a100), r waits for 4 of
    them, near's v100 node is idle, and p's stand-in on far asks 8 more. Divided with the
    stand-in's 8 among near's 16 GPUs, q's fair share fell below what it holds and r
    reclaimed q's job. The stand-in holds GPUs on far, whose GPUs are not in the division:
    it takes no share of near's, and q is within its own."""
    specs = desired(
        [
            cluster(
                "near",
                pools=[pool("a100", nodes=1), pool("v100", gpu_type="v100", nodes=1)],
            ),
            clusters()[1],
            project("p", gpus=0),
            project("q", gpus=0),
            project("r", gpus=0),
            workload("on-far", "p", gpus=8, clusters=["far"]),
            workload("q-run", "q", gpus=8, clusters=["near"], gpuTypes=["a100_80"]),
            workload("r-new", "r", gpus=4, clusters=["near"], gpuTypes=["a100_80"]),
        ]
    )
    made = plan(specs, running(specs, ("q/q-run", "a100-01", 8)), now=NOW)
    assert evictions(made) == []
    assert waits(made) == {
        "p/on-far": ReasonCode.CLUSTER_UNREACHABLE,
        "r/r-new": ReasonCode.NO_CAPACITY,
    }
    assert made.projects["q"].fair_share == 8


def test_cp_plan_on_a_snapshot_without_last_known_evicts_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The way the lifetime test met it: ``cp plan --observed`` on a snapshot file whose
    silent cluster says nothing of what may run there."""
    docs = [
        *clusters(),
        project("p", gpus=8, limit=8),
        workload("run-1", "p", gpus=4, clusters=["near"]),
        workload("run-2", "p", gpus=4, clusters=["near"]),
        workload("on-far", "p", gpus=4, clusters=["far"]),
    ]
    specs = write_specs(tmp_path / "specs", docs)
    snap = running(desired(docs), ("p/run-1", "a100-01", 4), ("p/run-2", "a100-01", 4))
    observed = tmp_path / "snapshot.json"
    observed.write_text(snap.model_dump_json(by_alias=True))
    made = ok(cp(capsys, "plan", specs, "--observed", observed, "--json")).json()
    assert made["actions"] == []
    assert made["unreachable"] == {"far": "TemporaryError: connection refused"}
    assert {p["workload"]: p["reason"]["code"] for p in made["pending"]} == {
        "p/on-far": "cluster-unreachable"
    }
