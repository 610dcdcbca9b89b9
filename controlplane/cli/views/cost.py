"""``cp cost``: a workload's fan-out candidates as a table that fits the terminal: candidate
names whole, the note on why wrapping, the least telling columns left out when narrow."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from controlplane.cli.views.tables import Cell, Column, print_table
from controlplane.costs import CandidateTable
from solvers import reasons
from solvers.fanout import describe_start
from specs.durations import format_duration


def print_candidates(console: Console, table: CandidateTable) -> None:
    """One line per candidate, chosen ones marked ``*``."""
    kind = (
        f"fan-out, up to {table.max_parallel} at once"
        if table.fan_out
        else "no fanOut: what fan-out would choose"
    )
    # asked, a cluster may have nothing to tell (Kubernetes gives no start forecasts)
    told = table.forecasted and any(v.estimate is not None for v in table.rows)
    where = (
        "estimates from the clusters"
        if told
        else "the clusters gave no estimates: by cost"
        if table.forecasted
        else "no estimates: by cost"
    )
    console.print(f"[bold]{table.workload}[/] ({kind}; {where})", highlight=False)
    for job in table.active:
        where = f"{job.cluster}/{job.pool}" if job.pool else job.cluster
        since = f" since {reasons.stamp(job.started_at)}" if job.started_at else ""
        console.print(
            f"Now: job {job.job_id} {job.state} on {where}{since}, {job.gpus} GPUs; the "
            "candidates are where another submission would go.",
            highlight=False,
            markup=False,
        )
    if table.blocked is not None:
        console.print(
            f"A plan submits none of these now: {table.blocked.code.value}: "
            f"{table.blocked.message}",
            highlight=False,
            markup=False,
        )
    if not table.rows:
        console.print("No candidates: no node pool fits its GPU type, memory, clusters and shape.")
        return
    columns = [
        Column(""),
        Column("candidate"),
        Column("type", drop=3),
        Column("partition", drop=1),
        Column("nodes", drop=2),
        Column("mode", drop=4),
        Column("estimated\nstart"),
        Column("walltime", drop=5),
        Column("cost", "number"),
        Column("why", "text"),
    ]
    rows: list[list[Cell]] = []
    for v in table.rows:
        c = v.candidate
        wall = format_duration(c.walltime) if c.walltime else "-"
        if c.time_min:
            wall = f"{format_duration(c.time_min)}..{wall}"
        start = describe_start(v.estimate, table.now, table.forecasted).removeprefix("starts ")
        chosen = v.status.value == "chosen"
        rows.append(
            [
                Text("*" if chosen else " ", style="bold green" if chosen else ""),
                Text(c.name, style="bold" if chosen else ""),
                c.gpu_type,
                c.partition or "-",
                f"{c.nodes} x {c.gpus_per_node}",
                c.mode.value,
                Text(start),
                wall,
                f"{c.cost:,.2f}",
                Text(f"{v.status.value}: {v.note}"),
            ]
        )
    if not told:  # the title says so: "no start estimate" on every row only took room
        at = [c.header for c in columns].index("estimated\nstart")
        columns.pop(at)
        for row in rows:
            row.pop(at)
    print_table(console, columns, rows)
