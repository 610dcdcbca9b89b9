"""The clusters as observed: GPUs per cluster (ours, others', free), who uses them, where a
workload runs. With several clusters (Slurm and Kubernetes in one plan) a quota is one
number across them; these views show how it splits."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from controlplane.cli.views.tables import Cell, Column, print_table
from solvers.reasons import gpus as n
from solvers.reasons import shape
from specs.snapshot import Job, Snapshot


def cluster_rows(snap: Snapshot) -> list[dict[str, Any]]:
    """Per cluster: the nodes of the declared pools, their GPUs that take work and those
    that do not (drained, down), GPUs held there by our jobs and by others' (on drained
    nodes too: ours + others' + free = GPUs + drained), the GPUs free on the nodes that
    take work; and how many nodes no pool declares (never planned on, and not counted)."""
    rows = []
    for c in sorted(snap.clusters, key=lambda c: c.name):
        pooled = {node.name for node in c.nodes if node.pool is not None}

        def there(job: Job, pooled: set[str] = pooled) -> int:
            return sum(r.gpus for r in job.replicas if r.node in pooled)

        held = [j for j in c.jobs if j.state.holds_gpus]
        ours = sum(there(j) for j in held if j.workload is not None)
        others = sum(there(j) for j in held if j.workload is None)
        taking = {node.name: node.gpus for node in c.nodes if node.schedulable and node.pool}
        for r in (r for j in held for r in j.replicas):
            if r.node in taking:
                taking[r.node] -= r.gpus
        gpus = sum(node.gpus for node in c.nodes if node.schedulable and node.name in pooled)
        drained = sum(node.gpus for node in c.nodes if node.name in pooled) - gpus
        rows.append(
            {
                "cluster": c.name,
                "reachable": c.reachable,
                "error": c.error,
                "nodes": len(pooled),
                "gpus": gpus,
                "drainedGpus": drained,
                "ours": ours,
                "others": others,
                "free": sum(max(0, free) for free in taking.values()),
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
        rows.append([r["cluster"], *counts, ""])
    columns = [
        Column("cluster"),
        *(Column(h, "number", drop=d) for h, d in (("nodes", 1), ("GPUs", 5), ("drained", 2))),
        *(Column(h, "number", drop=d) for h, d in (("ours", 4), ("others'", 3), ("free", 6))),
        Column("", "text"),
    ]
    print_table(console, columns, rows, title="Clusters (GPUs, now)")
    usage = usage_by_cluster(snap)
    if len(snap.clusters) > 1 and usage:
        console.print(
            "In use by project: "
            + "; ".join(
                f"{p} " + ", ".join(f"{g} on {c}" for c, g in per.items())
                for p, per in usage.items()
            )
        )


def describe_job(cluster: str, job: Job) -> str:
    """``k8s: job cp-chem/x RUNNING, 2 x 4 GPUs on a100-1, a100-2``."""
    nodes = sorted({r.node for r in job.replicas if r.node})
    per = job.replicas[0].gpus if job.replicas else 0
    where = f" on {', '.join(nodes)}" if nodes else ""
    return f"{cluster}: job {job.id} {job.state.value}, {shape(len(job.replicas), per)}{where}"


def jobs_json(snap: Snapshot, workload: str) -> list[dict[str, Any]]:
    return [
        {"cluster": c, **j.model_dump(mode="json", by_alias=True, exclude_none=True)}
        for c, j in snap.jobs_of(workload)
    ]
