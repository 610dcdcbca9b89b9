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
