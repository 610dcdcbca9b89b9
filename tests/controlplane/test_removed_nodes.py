"""A simulated cluster's nodes are its spec: nodes the specs remove take the jobs running
there down with them (NODE_FAIL). The plan said "No changes now" for such a change, and
`--detailed-exitcode` exited 0, while the apply after it ended running work with no action
and no word (user trial). The plan now names each node that leaves with the jobs that end
there, and counts as a change."""

from __future__ import annotations

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
            project("p", gpus=16),
            workload("a", "p", gpus=8),
            workload("b", "p", gpus=8),
        ],
    )


def test_the_plan_names_the_nodes_the_specs_remove_and_what_ends_there(
    tmp_path: Path, capsys: Capsys
) -> None:
    root = specs(tmp_path / "s", nodes=2)
    assert cp(capsys, "apply", root, "--auto-approve", "--now", NOW).code == 0
    specs(root, nodes=1)  # a100-02 leaves, with the job that runs there

    plan = cp(capsys, "plan", root, "--json", "--now", LATER).json()
    assert plan["nodesRemoved"] == [{"cluster": "sim", "node": "a100-02", "workloads": ["p/b"]}], (
        plan.get("nodesRemoved")
    )
    assert cp(capsys, "plan", root, "--now", LATER, "--detailed-exitcode").code == 2
    text = cp(capsys, "plan", root, "--now", LATER).out
    assert "node a100-02 of sim leaves" in text and "p/b" in text, text
    assert "No changes" not in text, text
    markdown = cp(capsys, "plan", root, "--now", LATER, "--markdown").out
    assert "a100-02" in markdown and "p/b" in markdown, markdown

    assert cp(capsys, "apply", root, "--auto-approve", "--now", LATER).code == 0
    after = cp(capsys, "plan", root, "--json", "--now", LATER).json()
    assert "nodesRemoved" not in after  # done: the node is gone, the job ended
    assert cp(capsys, "plan", root, "--now", LATER, "--detailed-exitcode").code == 0


def test_an_idle_node_removed_is_no_change(tmp_path: Path, capsys: Capsys) -> None:
    root = specs(tmp_path / "s", nodes=3)
    assert cp(capsys, "apply", root, "--auto-approve", "--now", NOW).code == 0
    specs(root, nodes=2)  # a100-03 held nothing
    plan = cp(capsys, "plan", root, "--json", "--now", LATER).json()
    assert "nodesRemoved" not in plan
    assert cp(capsys, "plan", root, "--now", LATER, "--detailed-exitcode").code == 0
