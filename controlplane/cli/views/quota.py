"""Quota tables: per project and department, and the levels one workload answers to.

The per-queue table is drawn as the tree it is (each department, its sub-departments and
projects indented under it), so no department column is needed and names stay whole at
80 columns (controlplane/cli/views/tables.py).
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from controlplane.cli.views.tables import Cell, Column, print_table
from controlplane.plan import QueueStatus
from solvers.reasons import gpus as n

# at narrow widths the least telling numbers go first; the names always stay whole
_NUMBERS = [
    Column("deserved", "number", drop=4),
    Column("fair\nshare", "number", drop=3),
    Column("allocated", "number", drop=5),
    Column("limit", "number", drop=2),
    Column("waiting", "number", drop=1),
]


def tree_rows(
    projects: dict[str, QueueStatus], departments: dict[str, QueueStatus]
) -> list[tuple[int, str, str, QueueStatus]]:
    """(depth, kind, name, status) of every queue, depth-first from the top in name order.
    A department whose parent chain loops or is unknown is shown at the top."""
    children: dict[str | None, list[tuple[str, str, QueueStatus]]] = {}
    for name, q in departments.items():
        parent = q.department if q.department in departments else None
        children.setdefault(parent, []).append(("department", name, q))
    for name, q in projects.items():
        parent = q.department if q.department in departments else None
        children.setdefault(parent, []).append(("project", name, q))
    out: list[tuple[int, str, str, QueueStatus]] = []
    seen: set[str] = set()

    def walk(parent: str | None, depth: int) -> None:
        # departments first, then projects, each in name order
        for kind, name, q in sorted(children.get(parent, []), key=lambda c: (c[0], c[1])):
            out.append((depth, kind, name, q))
            if kind == "department" and name not in seen:
                seen.add(name)
                walk(name, depth + 1)

    walk(None, 0)
    return out


def print_quota(
    console: Console,
    projects: dict[str, QueueStatus],
    departments: dict[str, QueueStatus],
    *,
    now: bool = False,
) -> None:
    """The quota tree after the plan; with ``now`` (``cp status``), what each queue holds
    now beside it, so current figures are never read off the plan's outcome."""
    rows: list[list[Cell]] = []
    unseen: list[str] = []  # queues whose allocation counts work held for a silent cluster
    for depth, kind, name, q in tree_rows(projects, departments):
        if q.unreachable:
            unseen.append(f"{kind} {name} {n(q.unreachable)}")
        label = Text("  " * depth + name, style="bold" if kind == "department" else "")
        if kind == "department":
            label.append(" (dept)", style="dim")
        over = kind == "project" and q.allocated > q.deserved
        alloc = Text(n(q.allocated), style="yellow" if over else "")
        numbers: list[Cell] = [n(q.deserved), n(q.fair_share), alloc, n(q.limit), n(q.pending)]
        if now:
            held = Text(
                n(q.held), style="yellow" if kind == "project" and q.held > q.deserved else ""
            )
            numbers.insert(2, held)
        rows.append([label, *numbers])
    columns = list(_NUMBERS)
    if now:
        columns[2] = Column("after\nplan", "number", drop=5)
        columns.insert(2, Column("held\nnow", "number"))
    title = "Quota (GPUs: held now, and after the plan)" if now else "Quota (GPUs, after the plan)"
    print_table(console, [Column("queue"), *columns], rows, title=title)
    if unseen:
        console.print(
            Text(
                "allocated counts GPUs held for clusters that did not answer (they may run "
                "there): " + ", ".join(unseen),
                style="dim",
            )
        )


def print_quota_chain(
    console: Console, chain: list[tuple[str, str, QueueStatus]], reason: str = ""
) -> None:
    """The quota levels a workload answers to; the one its reason names is marked."""
    rows: list[list[Cell]] = []
    for kind, name, q in chain:
        binds = (
            f"{kind} {name} " in reason
            or f"{kind} {name}'s" in reason
            or reason.endswith(f"{kind} {name}")
        )
        rows.append(
            [
                f"{kind} {name}",
                n(q.deserved),
                n(q.fair_share),
                n(q.allocated),
                n(q.limit),
                n(q.pending),
                Text("<- binds", style="yellow") if binds else "",
            ]
        )
    print_table(
        console,
        [Column("level"), *_NUMBERS, Column("", "name")],
        rows,
        title="Quota levels (GPUs, after the plan)",
    )
