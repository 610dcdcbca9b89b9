"""``cp get``: kubectl-style listings of controlplane/inventory.py's rows.

Tables (``-o wide`` adds columns) fit the terminal with names whole
(controlplane/cli/views/tables.py); ``-o json`` and ``-o yaml`` print one document,
``{"kind": ..., "now": ..., "items": [...]}``, with every field of every row.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.text import Text

from controlplane.cli.views.tables import Cell, Column, print_table
from controlplane.inventory import JobRow, NodeRow, QueueRow, WorkloadRow
from solvers.reasons import gpus as n
from specs.actions import Action, Reason
from specs.durations import format_duration

_STATE_STYLE = {
    "running": "green",
    "ending": "magenta",
    "submitted": "cyan",
    "pending": "yellow",
    "blocked": "red",
    "failed": "red",
    "completed": "dim",
    "RUNNING": "green",
    "PENDING": "yellow",
    "idle": "green",
    "mixed": "yellow",
    "allocated": "",
    "down": "red",
    "drain": "red",
}


def document(kind: str, now: datetime, rows: list[Any]) -> dict[str, Any]:
    """The ``-o json|yaml`` document: every field of every row."""
    return {"kind": kind, "now": now.isoformat(), "items": [_plain(r) for r in rows]}


def write_yaml(doc: dict[str, Any]) -> None:
    from ruamel.yaml import YAML

    yaml = YAML()  # round-trip dumper: block style, fields kept in their order
    yaml.dump(doc, sys.stdout)


def print_rows(console: Console, kind: str, rows: list[Any], now: datetime, wide: bool) -> None:
    if not rows:
        console.print(f"No {kind} found.")
        return
    columns, cells = _TABLES[kind](rows, now, wide)
    # a file, a pipe, a CI log: no terminal's width to fit, so wide means every column
    print_table(console, columns, cells, every_column=wide and not console.is_terminal)


# an age's two largest units, as kubectl shows them: 25d11h, 3h5m, 5m17s
_AGE_UNITS = (86400, 3600, 60, 1)


def _age(since: datetime | None, now: datetime) -> str:
    if since is None:
        return "-"
    seconds = max(0, int((now - since).total_seconds()))
    largest = next((i for i, unit in enumerate(_AGE_UNITS) if seconds >= unit), 3)
    finest = _AGE_UNITS[min(largest + 1, 3)]
    return format_duration(seconds - seconds % finest)


def _state(value: str) -> Text:
    return Text(value, style=_STATE_STYLE.get(value, ""))


def _workloads(
    rows: list[WorkloadRow], now: datetime, wide: bool
) -> tuple[list[Column], list[list[Cell]]]:
    columns = [
        Column("name"),
        Column("state"),
        Column("gpus", "number"),
        Column("where", drop=2),
        Column("age", drop=3),
        Column("next", drop=4),
        Column("reason", drop=5),
    ]
    if wide:
        columns += [
            Column("type", drop=1),
            Column("priority", "number", drop=1),
            Column("job", drop=1),
            Column("nodes", "text", drop=1),
            Column("message", "text", drop=1),
        ]
    cells: list[list[Cell]] = []
    for r in rows:
        where = f"{r.cluster}/{r.pool}" if r.cluster and r.pool else r.cluster or "-"
        row: list[Cell] = [
            Text(r.name, style="bold"),
            _state(r.state),
            n(r.gpus),
            where,
            _age(r.since, now),
            r.next.op.value if r.next else "-",
            r.reason.code.value if r.reason else "-",
        ]
        if wide:
            message = r.reason or (r.next.reason if r.next else None)
            row += [
                r.type,
                str(r.priority) + ("" if r.preemptible else " np"),
                r.job or "-",
                Text(", ".join(r.nodes) or "-"),
                Text(message.message if message else "-"),
            ]
        cells.append(row)
    return columns, cells


def _queues(
    rows: list[QueueRow], now: datetime, wide: bool
) -> tuple[list[Column], list[list[Cell]]]:
    parent = "department" if rows and rows[0].kind == "project" else "parent"
    columns = [
        Column("name"),
        Column(parent, drop=2),
        Column("deserved", "number", drop=5),
        Column("fair\nshare", "number", drop=4),
        Column("allocated", "number", drop=6),
        Column("limit", "number", drop=3),
        Column("waiting", "number", drop=3),
        Column("workloads", "number", drop=1),
    ]
    if wide:
        columns += [Column("rank", "number", drop=1), Column("weight", "number", drop=1)]
    cells: list[list[Cell]] = []
    for r in rows:
        q = r.status
        row: list[Cell] = [
            Text(r.name, style="bold"),
            r.parent or "-",
            n(q.deserved),
            n(q.fair_share),
            n(q.allocated),
            n(q.limit),
            n(q.pending),
            str(r.workloads),
        ]
        if wide:
            row += [str(r.rank), f"{r.weight:g}"]
        cells.append(row)
    return columns, cells


def _nodes(rows: list[NodeRow], now: datetime, wide: bool) -> tuple[list[Column], list[list[Cell]]]:
    columns = [
        Column("name"),
        Column("cluster", drop=3),
        Column("pool", drop=2),
        Column("type", drop=1),
        Column("gpus", "number"),
        Column("used", "number"),
        Column("state"),
    ]
    # a window not over yet (an announced maintenance): shown where a node has one, kept
    # longer than the pool or type as the terminal narrows
    windows = any(r.reservations for r in rows)
    if windows:
        columns.append(Column("reserved", "text", drop=4))
    if wide:
        columns += [Column("partition", drop=1), Column("jobs", "text", drop=1)]
    cells: list[list[Cell]] = []
    for r in rows:
        # kubectl's way with a condition on top of a state (Ready,SchedulingDisabled)
        flags = [r.state] + ["overcommitted"] * r.overcommitted + ["reserved"] * r.reserved
        state = Text(",".join(flags), style="red") if len(flags) > 1 else _state(r.state)
        row: list[Cell] = [
            Text(r.name, style="bold"),
            r.cluster,
            r.pool or "-",
            r.gpu_type or "-",
            str(r.gpus),
            str(r.used),
            state,
        ]
        if windows:
            row.append(Text("; ".join(w.describe() for w in r.reservations) or "-"))
        if wide:
            row += [r.partition or "-", Text(", ".join(r.jobs) or "-")]
        cells.append(row)
    return columns, cells


def _jobs(rows: list[JobRow], now: datetime, wide: bool) -> tuple[list[Column], list[list[Cell]]]:
    columns = [
        Column("id"),
        Column("cluster", drop=2),
        Column("workload"),
        Column("state"),
        Column("gpus", "number"),
        Column("age", drop=3),
    ]
    if wide:
        columns += [
            Column("nodes", "text", drop=1),
            Column("pool", drop=1),
            Column("partition", drop=1),
            Column("plan", drop=1),
            Column("reason", "text", drop=1),
        ]
    cells: list[list[Cell]] = []
    for r in rows:
        row: list[Cell] = [
            Text(r.id, style="bold"),
            r.cluster,
            r.workload or Text("(not ours)", style="dim"),
            _state(r.state),
            str(r.gpus),
            _age(r.started_at or r.submitted_at, now),
        ]
        if wide:
            row += [
                Text(", ".join(r.nodes) or "-"),
                r.pool or "-",
                r.partition or "-",
                r.plan or "-",
                Text(r.reason or "-"),
            ]
        cells.append(row)
    return columns, cells


_TABLES: dict[str, Callable[[list[Any], datetime, bool], tuple[list[Column], list[list[Cell]]]]] = {
    "workloads": _workloads,
    "projects": _queues,
    "departments": _queues,
    "nodes": _nodes,
    "jobs": _jobs,
}


def _plain(value: Any) -> Any:
    """A row as JSON-ready data: camelCase keys, ISO times, reasons and actions as objects."""
    if isinstance(value, Reason):
        return {"code": value.code.value, "message": value.message}
    if isinstance(value, Action):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {_camel(f.name): _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)
