"""A node whose jobs hold more GPUs than it reports: over-committed.

User trial on Kubernetes: a gang of 2 x 4 GPUs ran on ``a100-0`` when the node's GPU
allocatable dropped to 4 (a GPU fell off the bus, the device plugin restarted). Nothing
evicts the pods, so the cluster reports 4 GPUs and our pods hold 8. ``cp get nodes`` showed
``gpus 4, used 4, allocated`` (the use capped at the count, the over-commit hidden) and
``cp status`` "GPUs 28, ours 8, free 24": ours + free above the GPUs, with nothing saying
why. ``used`` is what the jobs hold, the node is flagged ``overcommitted``, the GPUs held
beyond the count are counted in ``cp status``, and the planner neither places work on the
node nor counts on GPUs it does not have once the gang is gone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, project, workload
from tests.builders.cli import cp, ok, write_specs
from tests.builders.snapshots import job, write_snapshot

Capsys = pytest.CaptureFixture[str]
GANG = job("11", "bio/gang", ("a100-01", 4), ("a100-01", 4))  # 8 GPUs on a node of 4
LOST = {"a100-01": {"gpus": 4, "state": "allocated"}}  # as Kubernetes reports it then


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    specs = write_specs(
        tmp_path / "specs",
        [cluster(), project("bio", gpus=16), workload("gang", "bio", gpus=4, replicas=2)],
    )
    snapshot = write_snapshot(tmp_path / "snap.json", [GANG], reported=LOST)
    return specs, snapshot


def test_get_nodes_shows_what_is_held_and_flags_the_node(
    world: tuple[Path, Path], capsys: Capsys
) -> None:
    specs, snapshot = world
    doc = ok(cp(capsys, "get", "nodes", specs, "--observed", snapshot, "-o", "json")).json()
    rows = {r["name"]: r for r in doc["items"]}
    node = rows["a100-01"]
    assert (node["gpus"], node["used"], node["overcommitted"]) == (4, 8, True)
    assert node["state"] == "allocated"  # the observed state, as before: the flag is apart
    assert not any(r["overcommitted"] for name, r in rows.items() if name != "a100-01")
    text = ok(cp(capsys, "get", "nodes", specs, "--observed", snapshot)).out
    [line] = [x.split() for x in text.splitlines() if x.split()[:1] == ["a100-01"]]
    assert line[-3:] == ["4", "8", "allocated,overcommitted"], text


def test_get_nodes_state_overcommitted_lists_just_those(
    world: tuple[Path, Path], capsys: Capsys
) -> None:
    """The table shows the state as ``allocated,overcommitted``: filtering on the flag, as
    on a state, finds the node (it was refused: not one of idle, mixed, ...)."""
    specs, snapshot = world
    args = ("get", "nodes", specs, "--observed", snapshot, "-o", "json")
    doc = ok(cp(capsys, *args, "--state", "overcommitted")).json()
    assert [r["name"] for r in doc["items"]] == ["a100-01"]
    allocated = ok(cp(capsys, *args, "--state", "allocated")).json()
    assert "a100-01" in [r["name"] for r in allocated["items"]]


def test_status_counts_the_gpus_held_beyond_the_nodes(
    world: tuple[Path, Path], capsys: Capsys
) -> None:
    specs, snapshot = world
    data = ok(cp(capsys, "status", specs, "--observed", snapshot, "--json")).json()
    [row] = data["clusters"]
    # 4 + 3 x 8 a100, 8 x 4 v100; free: nothing on a100-01, every GPU of the others
    assert (row["gpus"], row["ours"], row["others"], row["free"]) == (60, 8, 0, 56)
    assert (row["overcommittedGpus"], row["overcommittedNodes"]) == (4, ["a100-01"])
    assert (
        row["ours"] + row["others"] + row["free"]
        == row["gpus"] + row["drainedGpus"] + row["overcommittedGpus"]
    )
    text = ok(cp(capsys, "status", specs, "--observed", snapshot)).out
    table = text[text.index("Clusters") :]
    assert "4 GPUs over-committed on a100-01" in " ".join(table.split()), text


def replicas_on(plan: dict[str, Any], node: str) -> list[str]:
    return [
        a["workload"]
        for a in plan["actions"]
        if any(r["node"] == node for r in a.get("replicas") or [])
    ]


@pytest.mark.parametrize("engine", ["best", "kai"])
@pytest.mark.parametrize("gpus", [1, 0])
def test_the_plan_places_nothing_on_the_node(
    tmp_path: Path, capsys: Capsys, gpus: int, engine: str
) -> None:
    """Work that fits anywhere goes elsewhere, even work of no GPUs (it went to the
    fullest node, which an over-committed one was, at 0 free), and the plan does not fail."""
    specs = write_specs(
        tmp_path / "specs",
        [
            cluster(),
            project("bio", gpus=16),
            workload("gang", "bio", gpus=4, replicas=2),
            workload("small", "bio", gpus=gpus, gpuTypes=["a100_80"]),
        ],
    )
    snapshot = write_snapshot(tmp_path / "snap.json", [GANG], reported=LOST)
    args = ("--observed", snapshot, "--engine", engine, "--json")
    plan = ok(cp(capsys, "plan", specs, *args)).json()
    assert [a["op"] for a in plan["actions"]] == ["submit"]
    assert replicas_on(plan, "a100-01") == []


@pytest.mark.parametrize("gang_types", [None, ["a100_80"]], ids=["moved", "reclaimed"])
def test_evicting_the_gang_frees_only_what_the_node_has(
    tmp_path: Path, capsys: Capsys, gang_types: list[str] | None
) -> None:
    """chem, below its deserved GPUs, wants one replica of 8 on an a100; the other a100s
    are full. Taking bio's gang off a100-01 (moved to the v100s, or reclaimed where it may
    only run on a100s) leaves a node of 4 GPUs: no room for it. The planner took the
    node's free GPUs as 0, not -4, so the eviction "freed" 8 there: it moved (or
    preempted) the gang and bound 8 GPUs onto a node of 4."""
    types = {"gpuTypes": gang_types} if gang_types else {}
    specs = write_specs(
        tmp_path / "specs",
        [
            cluster(),
            project("bio", gpus=0),
            project("chem", gpus=8),
            workload("gang", "bio", gpus=4, replicas=2, **types),
            workload("big", "chem", gpus=8, gpuTypes=["a100_80"]),
        ],
    )
    others = [job(f"2{i}", None, (f"a100-0{i}", 8)) for i in (2, 3, 4)]
    snapshot = write_snapshot(tmp_path / "snap.json", [GANG, *others], reported=LOST)
    plan = ok(cp(capsys, "plan", specs, "--observed", snapshot, "--json")).json()
    assert plan["actions"] == [], plan["actions"]
    assert [p["workload"] for p in plan["pending"]] == ["chem/big"]


def test_work_winding_down_beside_the_node_is_still_waited_for(
    tmp_path: Path, capsys: Capsys
) -> None:
    """chem/big fits once bio's job winding down on a100-02 has ended, and says so. The
    over-committed node beside it (someone else's 8 GPUs on 4) fits none of it; counted
    as fitting fewer than none, it hid the room coming on a100-02."""
    specs = write_specs(
        tmp_path / "specs",
        [
            cluster(),
            project("bio", gpus=0),
            project("chem", gpus=8),
            workload("old", "bio", gpus=8, gpuTypes=["a100_80"]),
            workload("big", "chem", gpus=8, gpuTypes=["a100_80"]),
        ],
    )
    jobs = [
        job("11", None, ("a100-01", 4), ("a100-01", 4)),
        job("12", "bio/old", ("a100-02", 8), state="COMPLETING"),
        *(job(f"2{i}", None, (f"a100-0{i}", 8)) for i in (3, 4)),
    ]
    snapshot = write_snapshot(tmp_path / "snap.json", jobs, reported=LOST)
    plan = ok(cp(capsys, "plan", specs, "--observed", snapshot, "--json")).json()
    [big] = [p for p in plan["pending"] if p["workload"] == "chem/big"]
    assert "held by work winding down (job 12 of bio/old)" in big["reason"]["message"], big
