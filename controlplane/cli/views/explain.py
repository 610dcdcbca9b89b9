"""``cp explain``: one workload's state, what the plan does to it or why it waits, what
could evict it while it runs, the quota levels it answers to, and its history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from controlplane.cli.views.history import history_json, print_history
from controlplane.cli.views.quota import print_quota_chain
from controlplane.cli.views.words import counted
from controlplane.eviction import Exposure, describe_protection
from controlplane.inventory import WorkloadRow
from controlplane.plan import QueueStatus
from controlplane.reservations import ReservedNode, Window
from specs.actions import Action, Pending
from specs.durations import format_duration

if TYPE_CHECKING:  # the store (sqlalchemy) is imported only where it is opened
    from controlplane.store.actionlog import HistoryRow

Chain = list[tuple[str, str, QueueStatus]]


def explain_json(
    row: WorkloadRow,
    exposure: Exposure | None,
    actions: list[Action],
    pending: list[Pending],
    chain: Chain,
    past: list[HistoryRow],
) -> dict[str, Any]:
    return {
        "workload": row.name,
        "state": row.state,
        "running": None if exposure is None else _exposure_json(exposure),
        "quota": [{"kind": k, "name": n, **q.model_dump(by_alias=True)} for k, n, q in chain],
        "actions": [a.model_dump(mode="json", by_alias=True) for a in actions],
        "pending": [p.model_dump(mode="json", by_alias=True) for p in pending],
        "history": history_json(past),
    }


def _exposure_json(e: Exposure) -> dict[str, Any]:
    return {
        "jobs": [
            {
                "cluster": j.cluster,
                "id": j.id,
                "state": j.state,
                "nodes": j.nodes,
                "gpus": j.gpus,
                "startedAt": j.started_at.isoformat() if j.started_at else None,
            }
            for j in e.jobs
        ],
        "segment": e.segment,
        "preemptible": e.preemptible,
        "minRuntimeEnds": e.min_runtime_ends.isoformat() if e.min_runtime_ends else None,
        "protected": e.protected,
        "couldEvict": [
            {"kind": t.kind, "message": t.message, "by": t.by, "waiting": t.waiting}
            for t in e.threats
        ],
    }


def print_explain(
    console: Console,
    row: WorkloadRow,
    exposure: Exposure | None,
    actions: list[Action],
    pending: list[Pending],
    chain: Chain,
    past: list[HistoryRow],
    now: datetime,
    queued: Sequence[str] = (),  # its jobs waiting in a cluster's queue
    edited: Pending | None = None,  # completed, and edited since (the plan's ``finished``)
    unreachable: Mapping[str, str] | None = None,  # clusters it waits for: their errors
    ended: Sequence[str] = (),  # how and when its last jobs the clusters show ended
    reserved: Sequence[ReservedNode] = (),  # windows not over on its nodes (or those it may use)
    placing: bool = False,  # ``reserved`` covers the nodes of every pool it may use
) -> None:
    console.print(Text.assemble((row.name, "bold"), f": {row.state}"), highlight=False)
    if exposure is not None:
        _print_running(console, exposure, now)
    if queued:
        _bullets(console, " ", [f"queued on {q}" for q in queued])
    if ended:
        _bullets(console, " ", list(ended))
    # a reason quotes spec text (a command's "v3[/]"): plain text, never markup
    for a in actions:
        console.print(
            Text.assemble(
                (a.op.value, "bold"),
                f" planned on {a.cluster} — {a.reason.code.value}: {a.reason.message}",
            ),
            highlight=False,
        )
    for p in pending:
        console.print(
            Text.assemble(("waits", "bold"), f" — {p.reason.code.value}: {p.reason.message}"),
            highlight=False,
        )
    for name, error in sorted((unreachable or {}).items()):
        console.print(Text(f"  cluster {name} did not answer: {error}", style="yellow"))
    if edited is not None:
        console.print(f"{edited.reason.code.value}: {edited.reason.message}", markup=False)
    elif not actions and not pending:
        quiet = {
            "running": "the plan leaves it running as it is",
            "completed": "it ran to completion; nothing to do (rename it to run it again)",
        }
        console.print(quiet.get(row.state, "nothing planned for it"))
    if reserved:
        where = "the nodes it may use" if placing else "its nodes"
        console.print(f"Reservations on {where}:")
        _bullets(console, "  -", _windows(reserved))
    console.print()
    reasons = " ".join([a.reason.message for a in actions] + [p.reason.message for p in pending])
    print_quota_chain(console, chain, reasons)
    if past:
        console.print("\nHistory:")
        print_history(console, past)


def _print_running(console: Console, e: Exposure, now: datetime) -> None:
    lines = []
    for j in e.jobs:
        started = (
            f", started {j.started_at.isoformat()} "
            f"({format_duration(max(0, int((now - j.started_at).total_seconds())))} ago)"
            if j.started_at
            else ""
        )
        nodes = ", ".join(j.nodes) or "nodes the cluster chose"
        lines.append(f"job {j.id} on {j.cluster}: {counted(j.gpus, 'GPU')} on {nodes}{started}")
    if e.segment:
        lines.append(f"checkpointed: {e.segment}")
    lines.append(describe_protection(e, now))
    _bullets(console, " ", lines)
    console.print("What could evict it:")
    _bullets(
        console,
        "  -",
        [
            t.message + (f" (waiting now: {', '.join(t.waiting)})" if t.waiting else "")
            for t in e.threats
        ],
    )


_NAMED = 8  # nodes named per window; a rolling maintenance may cover hundreds (--json: all)


def reservations_json(reserved: Sequence[ReservedNode]) -> list[dict[str, Any]]:
    return [
        {
            "cluster": r.cluster,
            "node": r.node,
            "name": r.window.name,
            "start": r.window.start.isoformat(),
            "end": r.window.end.isoformat() if r.window.end else None,
            "maintenance": r.window.maintenance,
            "underWay": r.under_way,
        }
        for r in reserved
    ]


def _windows(reserved: Sequence[ReservedNode]) -> list[str]:
    """One line per window and cluster, earliest first: ``maint (maintenance) from … to …
    on sim: a100-01, a100-02``; a window already begun says ``under way``."""
    nodes: dict[tuple[Window, str, bool], list[str]] = {}
    for r in reserved:  # earliest first already
        nodes.setdefault((r.window, r.cluster, r.under_way), []).append(r.node)
    lines = []
    for (w, cluster, begun), names in nodes.items():
        more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
        lines.append(
            f"{w.describe()}{' (under way)' if begun else ''} on {cluster}: "
            f"{', '.join(names[:_NAMED])}{more}"
        )
    return lines


def _bullets(console: Console, marker: str, lines: list[str]) -> None:
    """Lines that wrap under their own start, not under the marker."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for line in lines:
        grid.add_row(marker, Text(line))
    console.print(grid)
