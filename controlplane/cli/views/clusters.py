"""The clusters as observed: GPUs per cluster (ours, others', free), who uses them, where a
workload runs. With several clusters (Slurm and Kubernetes in one plan) a quota is one
number across them; these views show how it splits."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from controlplane.cli.views.tables import Cell, Column, print_table
from solvers.reasons import gpus as n
from solvers.reasons import shape, stamp
from solvers.reasons.words import gpu_count
from specs.snapshot import Job, Snapshot


def cluster_rows(snap: Snapshot) -> list[dict[str, Any]]:
    """Per cluster: the nodes of the declared pools, their GPUs that take work and those
    that do not (drained, down), GPUs held there by our jobs and by others' (on drained
    nodes too), the GPUs free on the nodes that take work (on each, those no job holds),
    the GPUs held beyond what over-committed nodes report and those nodes; and how many
    nodes no pool declares (never planned on, and not counted). On a node that takes work,
    held + free = GPUs + over-committed. Not a cluster gone from the specs: it has no GPUs
    now, only the completions the store remembers there."""
    rows = []
    for c in sorted((c for c in snap.clusters if not c.gone), key=lambda c: c.name):
        pooled = {node.name: node for node in c.nodes if node.pool is not None}
        ours = others = 0
        used = dict.fromkeys(pooled, 0)  # by every job, on each node
        for j in (j for j in c.jobs if j.state.holds_gpus):
            for r in j.replicas:
                if r.node is None or r.node not in used:
                    continue
                used[r.node] += r.gpus
                if j.workload is None:
                    others += r.gpus
                else:
                    ours += r.gpus
        taking = [node for node in pooled.values() if node.schedulable]
        gpus = sum(node.gpus for node in taking)
        # a GPU gone from under running work (fell off the bus): its jobs keep what they
        # hold. The excess is counted apart: it is what ours + others' + free exceed by
        over = {
            name: used[name] - node.gpus for name, node in pooled.items() if used[name] > node.gpus
        }
        rows.append(
            {
                "cluster": c.name,
                "reachable": c.reachable,
                "error": c.error,
                "nodes": len(pooled),
                "gpus": gpus,
                "drainedGpus": sum(node.gpus for node in pooled.values()) - gpus,
                "ours": ours,
                "others": others,
                "free": sum(max(0, node.gpus - used[node.name]) for node in taking),
                "overcommittedGpus": sum(over.values()),
                "overcommittedNodes": sorted(over),
                "nodesOutsidePools": len(c.nodes) - len(pooled),
            }
        )
    return rows


def usage_by_cluster(snap: Snapshot) -> dict[str, dict[str, int]]:
    """project -> cluster -> GPUs its jobs hold now."""
    out: dict[str, dict[str, int]] = {}
    for c in snap.clusters:
        for j in c.jobs:
            if j.workload is not None and j.state.holds_gpus:
                project = j.workload.split("/")[0]
                per = out.setdefault(project, {})
                per[c.name] = per.get(c.name, 0) + j.gpus
    return {p: dict(sorted(v.items())) for p, v in sorted(out.items())}


def print_clusters(console: Console, snap: Snapshot) -> None:
    rows: list[list[Cell]] = []
    for r in cluster_rows(snap):
        if not r["reachable"]:
            rows.append([r["cluster"], *["-"] * 6, Text(f"unreachable: {r['error']}", style="red")])
            continue
        counts = [n(r[k]) for k in ("nodes", "gpus", "drainedGpus", "ours", "others", "free")]
        rows.append([r["cluster"], *counts, _overcommitted(r)])
    columns = [
        Column("cluster"),
        *(Column(h, "number", drop=d) for h, d in (("nodes", 1), ("GPUs", 5), ("drained", 2))),
        *(Column(h, "number", drop=d) for h, d in (("ours", 4), ("others'", 3), ("free", 6))),
        Column("", "text"),
    ]
    print_table(console, columns, rows, title="Clusters (GPUs, now)")
    usage = usage_by_cluster(snap)
    if len(rows) > 1 and usage:
        console.print(
            "In use by project: "
            + "; ".join(
                f"{p} " + ", ".join(f"{g} on {c}" for c, g in per.items())
                for p, per in usage.items()
            )
        )


def _overcommitted(row: dict[str, Any]) -> Cell:
    """Why ours + others' + free exceeds the GPUs, if it does."""
    if not row["overcommittedGpus"]:
        return ""
    where = ", ".join(row["overcommittedNodes"])
    return Text(f"{gpu_count(row['overcommittedGpus'])} over-committed on {where}", style="red")


def describe_job(cluster: str, job: Job) -> str:
    """``k8s: job cp-chem/x RUNNING, 2 x 4 GPUs on a100-1, a100-2``."""
    nodes = sorted({r.node for r in job.replicas if r.node})
    per = job.replicas[0].gpus if job.replicas else 0
    where = f" on {', '.join(nodes)}" if nodes else ""
    return f"{cluster}: job {job.id} {job.state.value}, {shape(len(job.replicas), per)}{where}"


def ended_jobs(snap: Snapshot, workload: str, last: int = 3) -> list[str]:
    """How and when the workload's last jobs the clusters still show ended, the latest
    last: ``sim: job 1009 ended NODE_FAIL at 2027-01-01T01:00:00Z``."""
    ended = sorted(
        ((c, j) for c, j in snap.jobs_of(workload) if not j.state.active and j.ended_at),
        key=lambda cj: cj[1].ended_at or snap.now,
    )
    return [
        f"{c}: job {j.id} ended {j.state.value} at {stamp(j.ended_at or snap.now)}"
        for c, j in ended[-last:]
    ]


def jobs_json(snap: Snapshot, workload: str) -> list[dict[str, Any]]:
    return [
        {"cluster": c, **j.model_dump(mode="json", by_alias=True, exclude_none=True)}
        for c, j in snap.jobs_of(workload)
    ]
