"""Applied actions, newest first: who did what to which workload, when and why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from controlplane import collector
from controlplane.cli.views.entries import print_entries
from specs.fields import visible

if TYPE_CHECKING:  # the store (sqlalchemy) is imported only where it is opened
    from controlplane.store.actionlog import HistoryRow


@collector.paused()  # a large view: short-lived objects by the million
def print_history(console: Console, rows: list[HistoryRow]) -> None:
    """Two lines per action (when, op, workload, job, outcome, who applied it; its reason
    underneath), wrapped to the terminal with the workload's name whole."""
    entries = []
    for a, p, actor in rows:
        when = (a.started_at or p.created_at).strftime("%Y-%m-%d %H:%M:%S UTC")
        color = {"done": "green", "failed": "red"}.get(a.status, "yellow")
        entries.append(
            (
                Text(when),
                Text.assemble(
                    (f"{a.op:<8}", "bold"),
                    (a.workload, "bold"),
                    f"  {a.cluster}" + (f" job {a.job}" if a.job else ""),
                    "  ",
                    (a.status, color),
                    f"  plan:{p.id[:12]}",  # one word: an id is never split
                    f"  by {visible(actor)}" if actor else "",
                ),
                Text.assemble(
                    (a.reason_code, color),
                    f": {a.reason}",
                    (f"  ({visible(a.message)})" if a.message else "", "dim"),
                ),
            )
        )
    print_entries(console, entries)


def history_json(rows: list[HistoryRow]) -> list[dict[str, Any]]:
    return [
        {
            "plan": p.id,
            "at": (a.started_at or p.created_at).isoformat(),
            "op": a.op,
            "workload": a.workload,
            "cluster": a.cluster,
            "job": a.job,
            "status": a.status,
            "reason": {"code": a.reason_code, "message": a.reason},
            "message": a.message,
            "by": actor,
        }
        for a, p, actor in rows
    ]
