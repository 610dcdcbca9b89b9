"""A simulated cluster's nodes are its spec. Nodes the specs removed took the jobs running
there down with them (NODE_FAIL) as soon as anything observed the cluster: the plan said
"No changes now" (user trial); once it named them, a declined apply or a `cp observe` still
ended the jobs, and read-only views showed them ended before anything was applied (user
trial). Now a node the spec removes drains and leaves once empty; the plan moves its work
off it (a replacement elsewhere), with approval, and names the node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controlplane.cli.views.plan import node_removed
from controlplane.plan import NodeRemoved
from tests.builders import cluster, pool, project, workload
from tests.builders.cli import cp, write_specs

Capsys = pytest.CaptureFixture[str]
NOW = "2027-01-01T00:00:00Z"
LATER = "2027-01-01T00:30:00Z"


def specs(root: Path, nodes: int) -> Path:
    return write_specs(
        root,
        [
            cluster(pools=[pool(nodes=nodes)]),
            project("p", gpus=24),
            workload("a", "p", gpus=8),
            workload("b", "p", gpus=8),
        ],
    )


def states(root: Path) -> tuple[dict[str, str], list[str]]:
    """Each workload's job states, and the simulator's nodes, as its state file has them."""
    state = json.loads((root / ".cp" / "simulator" / "sim.json").read_text())["state"]
    jobs = {j["id"]: f"{j['workload']} {j['state']}" for j in state["jobs"]}
    return jobs, sorted(n["name"] for n in state["nodes"])


def test_the_work_on_a_removed_node_moves_off_it_with_approval(
    tmp_path: Path, capsys: Capsys
) -> None:
    root = specs(tmp_path / "s", nodes=2)
    assert cp(capsys, "apply", root, "--auto-approve", "--now", NOW).code == 0
    before = states(root)
    specs(root, nodes=1)  # a100-02 leaves; p/b runs there, and a100-03 would have room

    plan = cp(capsys, "plan", root, "--json", "--now", LATER).json()
    assert plan["nodesRemoved"] == [{"cluster": "sim", "node": "a100-02", "workloads": ["p/b"]}]
    # nowhere to go: it waits, and keeps running meanwhile
    assert plan["actions"] == [], plan["actions"]
    text = cp(capsys, "plan", root, "--now", LATER).out
    assert "node a100-02 of sim leaves once empty" in text and "p/b" in text, text
    # nothing observed, declined or shown ends it
    assert cp(capsys, "observe", root, "--now", LATER).code == 0
    assert cp(capsys, "get", "jobs", root, "--now", LATER).code == 0
    assert states(root)[0] == before[0]

    # a pool with room added: p/b moves there
    root_three = write_specs(
        root,
        [
            cluster(pools=[pool(nodes=1), pool("spare", nodes=1)]),
            project("p", gpus=24),
            workload("a", "p", gpus=8),
            workload("b", "p", gpus=8),
        ],
    )
    plan = cp(capsys, "plan", root_three, "--json", "--now", LATER).json()
    ops = sorted((a["op"], a["workload"]) for a in plan["actions"])
    assert ops in ([("cancel", "p/b"), ("submit", "p/b")], [("move", "p/b")]), ops
    assert "a100-02 leaves the cluster" in plan["actions"][0]["reason"]["message"]
    # the workload's spec did not change: no "new version" of it (user trial)
    told = [a["reason"]["message"] for a in plan["actions"]]
    assert not any("version" in m or "the spec changed" in m for m in told), told
    assert cp(capsys, "plan", root_three, "--now", LATER, "--detailed-exitcode").code == 2

    assert cp(capsys, "apply", root_three, "--auto-approve", "--now", LATER).code == 0
    after = cp(capsys, "plan", root_three, "--json", "--now", LATER).json()
    assert "nodesRemoved" not in after and after["actions"] == []  # a fixed point
    assert "a100-02" not in states(root_three)[1]  # empty: gone


def test_an_idle_node_removed_just_goes(tmp_path: Path, capsys: Capsys) -> None:
    root = specs(tmp_path / "s", nodes=3)
    assert cp(capsys, "apply", root, "--auto-approve", "--now", NOW).code == 0
    specs(root, nodes=2)  # a100-03 held nothing
    plan = cp(capsys, "plan", root, "--json", "--now", LATER).json()
    assert "nodesRemoved" not in plan and plan["actions"] == []
    assert cp(capsys, "plan", root, "--now", LATER, "--detailed-exitcode").code == 0


def shrink_specs(root: Path, gpus_per_node: int, spare: bool = False) -> Path:
    pools = [pool(nodes=1, gpus_per_node=gpus_per_node)]
    return write_specs(
        root,
        [
            cluster(pools=pools + ([pool("spare", nodes=1)] if spare else [])),
            project("p", gpus=24),
            workload("b", "p", gpus=4),
            workload("c", "p", gpus=4),
        ],
    )


def test_a_node_shrunk_below_its_work_sheds_what_no_longer_fits(
    tmp_path: Path, capsys: Capsys
) -> None:
    """gpusPerNode lowered under running work: the plan said "No changes now" and the nodes
    were over-committed at the next observation (user trial). Now the plan names the node
    and moves off only what does not fit; the rest runs on."""
    root = shrink_specs(tmp_path / "s", 8)
    assert cp(capsys, "apply", root, "--auto-approve", "--now", NOW).code == 0
    shrink_specs(root, 4)  # a100-01 runs p/b and p/c, 4 GPUs each: one must leave

    plan = cp(capsys, "plan", root, "--json", "--now", LATER).json()
    [node] = plan["nodesRemoved"]
    assert node["node"] == "a100-01" and node["shrinksTo"] == 4, node
    assert node["workloads"] in (["p/b"], ["p/c"]), node  # one of the two, not both
    assert plan["actions"] == [], plan["actions"]  # nowhere to go: it waits, and runs on
    text = cp(capsys, "plan", root, "--now", LATER).out
    assert "node a100-01 of sim shrinks to 4 GPUs (its Cluster spec gives it 4" in text, text
    assert cp(capsys, "observe", root, "--now", LATER).code == 0  # ends nothing
    jobs = cp(capsys, "get", "jobs", root, "--now", LATER, "--json").json()["items"]
    assert [j["state"] for j in jobs] == ["RUNNING", "RUNNING"], jobs

    root = shrink_specs(root, 4, spare=True)  # room elsewhere: the one that must leave moves
    plan = cp(capsys, "plan", root, "--json", "--now", LATER).json()
    [moving] = {a["workload"] for a in plan["actions"]}
    assert [moving] == plan["nodesRemoved"][0]["workloads"], plan["actions"]
    message = plan["actions"][0]["reason"]["message"]
    assert "its node a100-01 shrinks to 4 GPUs" in message, message
    assert cp(capsys, "apply", root, "--auto-approve", "--now", LATER).code == 0
    after = cp(capsys, "plan", root, "--json", "--now", LATER).json()
    assert "nodesRemoved" not in after and after["actions"] == []  # a fixed point
    state = json.loads((root / ".cp" / "simulator" / "sim.json").read_text())["state"]
    assert {n["name"]: n["gpus"] for n in state["nodes"]}["a100-01"] == 4
    running = sorted(j["workload"] for j in state["jobs"] if j["state"] == "RUNNING")
    assert running == ["p/b", "p/c"], state["jobs"]


def test_a_node_only_others_work_holds_says_so() -> None:
    """Work not ours on a node the spec shrinks: no workload of ours moves, and the line
    does not read ": move off it, or wait" with nobody named."""
    line = node_removed(NodeRemoved(cluster="sim", node="n1", workloads=[], shrinks_to=4))
    assert line.endswith("no new work fits there): work not ours holds it"), line


def test_an_edit_that_fits_the_shrunk_node_takes_what_its_old_job_leaves(
    tmp_path: Path, capsys: Capsys
) -> None:
    """One change shrinks the node (8 -> 2 GPUs) and the job on it (4 -> 2): the new
    version belongs on the GPUs its old job leaves. The node was drained at its old size,
    so the plan put it elsewhere, reclaiming a gang for it, and the next plan, nothing
    changed, moved work onto the node it had emptied: not a fixed point (user trial)."""
    docs = [cluster(pools=[pool(nodes=1)]), project("p", gpus=8), workload("b", "p", gpus=4)]
    root = write_specs(tmp_path / "s", docs)
    assert cp(capsys, "apply", root, "--auto-approve", "--now", NOW).code == 0
    docs = [
        cluster(pools=[pool(nodes=1, gpus_per_node=2)]),
        project("p", gpus=8),
        workload("b", "p", gpus=2),
    ]
    write_specs(root, docs)
    plan = cp(capsys, "plan", root, "--json", "--now", LATER).json()
    placed = [r["node"] for a in plan["actions"] if a["op"] != "cancel" for r in a["replicas"]]
    assert placed == ["a100-01"], plan["actions"]
    assert cp(capsys, "apply", root, "--auto-approve", "--now", LATER).code == 0
    assert cp(capsys, "plan", root, "--now", LATER, "--detailed-exitcode").code == 0


def test_a_fan_out_job_on_a_shrunk_node_says_it_runs_on_there(
    tmp_path: Path, capsys: Capsys
) -> None:
    """A fan-out workload is not replaced while it runs: on a node that shrank under it,
    the plan named it ("moves off it, or waits for room") and then said nothing of it, not
    even among what waits (code review)."""
    fan = workload("f", "p", gpus=4, strategy={"fanOut": True, "maxParallel": 2})
    first = [cluster(pools=[pool(nodes=1)]), project("p", gpus=8), workload("a", "p", gpus=4)]
    root = write_specs(tmp_path / "s", first)
    assert cp(capsys, "apply", root, "--auto-approve", "--now", NOW).code == 0
    write_specs(root, [*first, fan])
    assert cp(capsys, "apply", root, "--auto-approve", "--now", "2027-01-01T00:10:00Z").code == 0
    # the node shrinks to 4: p/a started first and stays; p/f must leave, and cannot
    write_specs(root, [cluster(pools=[pool(nodes=1, gpus_per_node=4)]), first[1], first[2], fan])
    plan = cp(capsys, "plan", root, "--json", "--now", LATER).json()
    [waits] = [w for w in plan["pending"] if w["workload"] == "p/f"]
    assert "its node a100-01 shrinks to 4 GPUs" in waits["reason"]["message"], waits
    assert "runs on there until it ends" in waits["reason"]["message"], waits
