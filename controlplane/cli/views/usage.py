"""``cp usage``: controlplane/usage.py's report as sshare-like tables, or one document."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from controlplane.cli.views.quota import tree_rows
from controlplane.cli.views.tables import Cell, Column, print_table
from controlplane.usage import UsageReport, UsageRow
from solvers.reasons import gpus as n
from specs.durations import format_duration


def usage_json(report: UsageReport) -> dict[str, Any]:
    return {
        "now": report.now.isoformat(),
        "month": report.month,
        "monthStart": report.month_start.isoformat(),
        "projects": {r.name: _row_json(r) for r in report.projects},
        "departments": {r.name: _row_json(r) for r in report.departments},
    }


def _row_json(r: UsageRow) -> dict[str, Any]:
    b = r.budget
    return {
        "kind": r.kind,
        "parent": r.parent,
        "deserved": r.status.deserved,
        "fairShare": r.status.fair_share,
        "allocated": r.status.allocated,
        "halfLifeSeconds": r.half_life,
        "byCost": r.by_cost,
        "decayedGpuHours": round(r.decayed_gpu_hours, 6),
        "share": round(r.share, 9),
        "monthGpuHours": round(r.month.gpu_hours, 6),
        "monthCost": round(r.month.cost, 6),
        "byGpuType": [
            {"gpuType": t.gpu_type, "gpuHours": round(t.gpu_hours, 6), "cost": round(t.cost, 6)}
            for t in r.by_type
        ],
        "budget": None
        if b is None
        else {
            "unit": b.unit,
            "perMonth": b.per_month,
            "used": round(b.used, 6),
            "left": round(b.left, 6),
            "spent": None
            if b.spent is None
            else {"code": b.spent.code.value, "message": b.spent.message},
        },
    }


def print_usage(console: Console, report: UsageReport) -> None:
    rows = {("project", r.name): r for r in report.projects}
    rows |= {("department", r.name): r for r in report.departments}
    order = tree_rows(
        {r.name: r.status for r in report.projects},
        {r.name: r.status for r in report.departments},
    )
    cells: list[list[Cell]] = []
    for depth, kind, name, _ in order:
        r = rows[(kind, name)]
        cells.append(
            [
                _label(depth, kind, name),
                n(r.status.deserved),
                n(r.status.fair_share),
                f"{r.decayed_gpu_hours:,.1f}",
                format_duration(r.half_life) if r.half_life else "-",
                f"{r.share:.2%}" + (" *" if r.by_cost else ""),
                f"{r.month.gpu_hours:,.1f}",
                f"{r.month.cost:,.2f}",
                _budget(r),
            ]
        )
    print_table(
        console,
        [
            Column("queue"),
            Column("deserved", "number", drop=3),
            Column("fair\nshare", "number", drop=4),
            Column("decayed\nGPU-h", "number", drop=6),
            Column("half\nlife", "number", drop=1),
            Column("usage", "number", drop=2),
            Column("GPU-h\nmonth", "number", drop=7),
            Column("cost\nmonth", "number", drop=5),
            Column("budget\nleft", "number"),
        ],
        cells,
        title=f"Usage (GPUs and GPU-hours; month: {report.month}, UTC)",
    )
    typed: list[list[Cell]] = [  # in the same tree as the table above
        [_label(depth, kind, name), t.gpu_type, f"{t.gpu_hours:,.1f}", f"{t.cost:,.2f}"]
        for depth, kind, name, _ in order
        for t in rows[(kind, name)].by_type
    ]
    if typed:
        console.print()
        print_table(
            console,
            [
                Column("queue"),
                Column("GPU type"),
                Column("GPU-h", "number"),
                Column("cost", "number"),
            ],
            typed,
            title=f"By GPU type, {report.month}",
        )
    spent = [r for r in report.projects if r.budget is not None and r.budget.spent is not None]
    for r in spent:
        assert r.budget is not None and r.budget.spent is not None
        console.print(Text(f"{r.name}: {r.budget.spent.message}", style="red"))
    console.print(
        Text(
            "usage: decayed GPU-hours as a share of what the clusters could deliver over the "
            "decay window (it bends the over-quota split, never the deserved quota)",
            style="dim",
        )
    )
    if any(r.by_cost for r in report.projects):
        console.print(
            Text(
                "*: fairshare.byCost: each GPU-hour weighed by its type's costPerGpuHour, as a "
                "share of the cost the clusters could deliver (the decayed GPU-hours beside it "
                "are not weighed)",
                style="dim",
            )
        )


def _label(depth: int, kind: str, name: str) -> Text:
    """A queue in the tree: indented by its depth, a department in bold and said so."""
    label = Text("  " * depth + name, style="bold" if kind == "department" else "")
    if kind == "department":
        label.append(" (dept)", style="dim")
    return label


def _budget(r: UsageRow) -> Text:
    b = r.budget
    if b is None:
        return Text("-")
    text = f"{b.left:,.1f} h" if b.unit == "gpu-hours" else f"{b.left:,.2f}"
    return Text(text, style="red" if b.spent is not None else "")
