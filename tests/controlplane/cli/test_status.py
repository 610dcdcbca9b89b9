"""``cp status`` tells what is held now from what the plan would make of it: a project's
GPUs after the plan are never shown as if current."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import cluster, project, workload
from tests.builders.cli import cp, ok, write_specs

Capsys = pytest.CaptureFixture[str]
T0 = "2026-11-22T10:00:00+00:00"


def test_status_shows_held_now_beside_after_the_plan(tmp_path: Path, capsys: Capsys) -> None:
    first = [cluster(), project("p", gpus=16), workload("a", "p", gpus=4)]
    root = write_specs(tmp_path / "s", first)
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", T0))
    write_specs(root, [*first, workload("b", "p", gpus=8)])  # the plan would start b
    data = ok(cp(capsys, "status", root, "--json", "--now", T0)).json()
    assert (data["projects"]["p"]["held"], data["projects"]["p"]["allocated"]) == (4, 12)
    text = ok(cp(capsys, "status", root, "--now", T0)).out
    assert "held now" in text and "after the plan" in text
    [row] = [line.split() for line in text.splitlines() if line.split()[:1] == ["p"]]
    # queue, deserved, fair share, held now, after plan, limit, waiting
    assert row[3:5] == ["4", "12"], text


def test_the_clusters_table_counts_the_nodes_of_the_declared_pools() -> None:
    """`cp status` counted every node a cluster reports: "6 nodes, 24 GPUs, 8 free" for
    specs that declare only the a100 pool (user trial on real Slurm). Nodes no pool
    declares are never planned on; they are counted apart, and so is what runs there."""
    from controlplane.cli.views.clusters import cluster_rows
    from specs.snapshot import ClusterState, Job, Node, Replica, Snapshot
    from tests.builders import NOW

    nodes = [
        Node(name="a1", pool="a100", gpus=8),
        Node(name="v1", pool=None, gpus=4),
        Node(name="v2", pool=None, gpus=4),
    ]
    jobs = [
        Job(id="1", workload="p/w", replicas=[Replica(node="a1", gpus=2)]),
        Job(id="2", workload=None, replicas=[Replica(node="v1", gpus=4)]),
    ]
    [row] = cluster_rows(
        Snapshot(now=NOW, clusters=[ClusterState(name="c", nodes=nodes, jobs=jobs)])
    )
    assert (row["nodes"], row["gpus"], row["ours"], row["others"], row["free"]) == (1, 8, 2, 0, 6)
    assert row["nodesOutsidePools"] == 2


def test_the_clusters_table_counts_free_gpus_on_the_nodes_that_take_work() -> None:
    """A job on a cordoned node was taken from the free GPUs of the others: "32 GPUs,
    4 ours, 28 free" with all 32 idle (user trial on Kubernetes)."""
    from controlplane.cli.views.clusters import cluster_rows
    from specs.snapshot import ClusterState, Job, Node, Replica, Snapshot
    from tests.builders import NOW

    nodes = [
        Node(name="h0", pool="h100", gpus=4, state="drain"),
        Node(name="h1", pool="h100", gpus=4),
        Node(name="h2", pool="h100", gpus=4),
    ]
    jobs = [
        Job(id="1", workload="p/w", replicas=[Replica(node="h0", gpus=4)]),
        Job(id="2", workload=None, replicas=[Replica(node="h1", gpus=1)]),
    ]
    [row] = cluster_rows(
        Snapshot(now=NOW, clusters=[ClusterState(name="c", nodes=nodes, jobs=jobs)])
    )
    assert (row["nodes"], row["gpus"], row["ours"], row["others"], row["free"]) == (3, 8, 4, 1, 7)


def test_gpus_of_drained_nodes_are_counted_apart(tmp_path: Path, capsys: Capsys) -> None:
    """`ours` counted a job on a cordoned node that `GPUs` left out: "GPUs 8, ours 12"
    (user trial on Kubernetes). The drained nodes' GPUs are a column of their own, so
    ours + others' + free adds up to GPUs + drained."""
    from controlplane.cli.views.clusters import cluster_rows, print_clusters
    from specs.snapshot import ClusterState, Job, Node, Replica, Snapshot
    from tests.builders import NOW

    nodes = [
        Node(name="h0", pool="h100", gpus=8, state="drain"),
        Node(name="h1", pool="h100", gpus=4),
        Node(name="x", pool=None, gpus=4, state="down"),  # no pool: not counted at all
    ]
    jobs = [Job(id="1", workload="p/w", replicas=[Replica(node="h0", gpus=8)])]
    snap = Snapshot(now=NOW, clusters=[ClusterState(name="c", nodes=nodes, jobs=jobs)])
    [row] = cluster_rows(snap)
    counts = ("gpus", "drainedGpus", "ours", "others", "free")
    assert tuple(row[k] for k in counts) == (4, 8, 8, 0, 4)
    assert row["ours"] + row["others"] + row["free"] == row["gpus"] + row["drainedGpus"]
    from rich.console import Console

    console = Console(record=True, width=120)
    print_clusters(console, snap)
    text = console.export_text()
    assert "drained" in text
    [line] = [x.split() for x in text.splitlines() if x.split()[:1] == ["c"]]
    assert line[1:7] == ["2", "4", "8", "8", "0", "4"], text  # nodes, GPUs, drained, ours, ...


def test_polling_status_adds_nothing_to_the_store(tmp_path: Path, capsys: Capsys) -> None:
    """Every `cp status` at another time stored its plan: 30 polls of an idle cluster added
    30 plan records and ~118 KB, ~6 MB a day at one a minute (user trial), where an idle
    `cp apply` adds nothing. A dashboard's status stores no plan."""
    import sqlite3

    specs = write_specs(tmp_path / "s", [cluster(), project("p", gpus=8), workload("w", "p")])
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", "2027-01-01T00:00:00Z"))

    def plans() -> int:
        with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
            return int(db.execute("SELECT count(*) FROM plans").fetchone()[0])

    before = plans()
    for minute in range(1, 6):
        ok(cp(capsys, "status", specs, "--now", f"2027-01-01T00:0{minute}:00Z"))
    assert plans() == before
