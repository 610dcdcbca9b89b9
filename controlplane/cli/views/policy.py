"""How a policy change looks: figures before -> after, fair shares, affected workloads."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from controlplane.cli.views.sections import Section, cell
from controlplane.cli.views.tables import Cell, Column, print_table
from controlplane.plan import PolicyChange, PolicyDiff, ShareChange
from solvers.reasons import gpus as _n
from specs.diff import show

# a fate a reviewer should not miss
_DISRUPTIVE = {
    "reclaimed",
    "preempted",
    "replaced",
    "cancelled",
    "shrinks",
    "moved",
}


def value(v: bool | float | str | None) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    return _n(v) if isinstance(v, float | int) else str(v)


# the store charges use at the price of its day (controlplane/store/pricebook.py): a new
# price is no refund or surcharge on what ran before, and a reviewer should not fear one
PRICE_NOTE = (
    "A new price counts from the first observation that sees it (cp apply, cp watch, "
    "cp observe): GPU-hours used before keep the price of their day."
)


def _figure(c: PolicyChange, v: bool | float | str | None) -> str:
    """A figure as the specs write it: a price as given (4.5, not 4.50)."""
    return show(v) if c.price_of is not None and v is not None else value(v)


def field_text(c: PolicyChange) -> str:
    """What changed, in the table's field column: the field as the specs spell it, a price
    in words (``price of a100_80 per GPU-hour``), or ``added`` / ``removed``."""
    if not c.field:
        return "added" if c.before is None else "removed"
    if (gpu_type := c.price_of) is not None:
        return f"price of {gpu_type} per GPU-hour"
    return c.field


def change_text(c: PolicyChange) -> str:
    """``project chem quota.limit: 32 -> 16``, ``price of a100_80 on cluster sim: 3 -> 4.5
    per GPU-hour`` (or ``added`` / ``removed``)."""
    if not c.field:
        return f"{c.kind} {c.name}: {field_text(c)}"
    if (gpu_type := c.price_of) is not None:
        return (
            f"price of {gpu_type} on {c.kind} {c.name}: "
            f"{_figure(c, c.before)} -> {_figure(c, c.after)} per GPU-hour"
        )
    return f"{c.kind} {c.name} {c.field}: {value(c.before)} -> {value(c.after)}"


def _priced(diff: PolicyDiff) -> bool:
    return any(c.price_of is not None for c in diff.changes)


def share_text(s: ShareChange) -> str:
    return (
        f"fair share {value(s.fair_share_before)} -> {value(s.fair_share_after)}, "
        f"allocated {value(s.allocated_before)} -> {value(s.allocated_after)}"
    )


def change_count(diff: PolicyDiff) -> int:
    """The changes as people count them: a queue added is one, whatever figures it comes
    with (each is a row of the table)."""
    added = {(c.kind, c.name) for c in diff.changes if not c.field and c.before is None}
    return sum(not (c.field and (c.kind, c.name) in added) for c in diff.changes)


def summary(diff: PolicyDiff) -> str:
    moved = [w for w in diff.workloads if w.head in _DISRUPTIVE]
    changes = change_count(diff)
    parts = [f"{changes} policy change{'s' if changes != 1 else ''}"] if changes else []
    # a queue's row is shown when its fair share or only its allocation moved (or, for a
    # queue whose policy changed, neither): told apart
    shares = sum(s.fair_share_before != s.fair_share_after for s in diff.shares)
    if shares:
        parts.append(f"{shares} fair share{'s' if shares != 1 else ''} moved")
    if allocations := sum(
        s.fair_share_before == s.fair_share_after and s.allocated_before != s.allocated_after
        for s in diff.shares
    ):
        parts.append(f"{allocations} allocation{'s' if allocations != 1 else ''} changed")
    if diff.workloads:
        parts.append(
            f"{len(diff.workloads)} workload{'s' if len(diff.workloads) != 1 else ''} affected"
            + (f" ({len(moved)} disrupted)" if moved else "")
        )
    return f"Against {diff.against}: " + ", ".join(parts) + "."


def print_policy(console: Console, diff: PolicyDiff) -> None:
    """The summary line, then each part as a table that fits the terminal (names whole;
    the reasons wrap; views/tables.py)."""
    console.print(Text(summary(diff), style="bold"))
    if diff.changes:
        rows: list[list[Cell]] = [
            [f"{c.kind} {c.name}", field_text(c), _figure(c, c.before), _figure(c, c.after)]
            for c in diff.changes
        ]
        columns = [
            Column("queue"),
            Column("field"),
            Column("before", "number"),
            Column("after", "number"),
        ]
        print_table(console, columns, rows, title="Policy")
        if _priced(diff):
            console.print(Text(PRICE_NOTE))
    if diff.shares:
        rows = [
            [
                f"{s.kind} {s.name}",
                f"{value(s.fair_share_before)} -> {value(s.fair_share_after)}",
                f"{value(s.allocated_before)} -> {value(s.allocated_after)}",
            ]
            for s in diff.shares
        ]
        columns = [
            Column("queue"),
            Column("fair share", "number"),
            Column("allocated", "number", drop=1),
        ]
        print_table(console, columns, rows, title="Fair shares")
    if diff.workloads:
        rows = []
        # the disrupted first: a comment cut to its size must still name every eviction
        for w in sorted(diff.workloads, key=lambda w: w.head not in _DISRUPTIVE):
            style = "red" if w.head in _DISRUPTIVE else ""
            why = f"{w.reason.code.value}: {w.reason.message}" if w.reason else ""
            rows.append([w.workload, w.base, Text(w.head, style=style), Text(why)])
        columns = [
            Column("workload"),
            Column("without\nthe change"),
            Column("with it"),
            Column("why", "text"),
        ]
        print_table(console, columns, rows, title="Workloads")


def _counted(diff: PolicyDiff) -> str:
    """The count of a section of changes, as the summary line has it, and its rows."""
    changes, rows = change_count(diff), len(diff.changes)
    return f"{changes:,}" if changes == rows else f"{changes:,}; {rows:,} figures"


def policy_sections(diff: PolicyDiff) -> list[Section]:
    """The policy diff as sections of the pull-request comment (views/markdown.py): the
    changed figures and the workloads whose fate changes open, the fair shares folded.
    Its summary line goes at the top of the comment (:func:`summary`)."""
    sections = []
    if diff.changes:
        sections.append(
            Section(
                title=f"Policy changes ({_counted(diff)})",
                columns=["of", "field", "before", "after"],
                align=["---", "---", "---:", "---:"],
                rows=[
                    f"| {c.kind} `{cell(c.name)}` | {cell(field_text(c))} "
                    f"| {cell(_figure(c, c.before))} | {cell(_figure(c, c.after))} |"
                    for c in diff.changes
                ],
                noun="policy figures",
                note=PRICE_NOTE if _priced(diff) else "",
                open=True,
            )
        )
    if diff.shares:
        sections.append(
            Section(
                title=f"Fair shares and allocations before -> after ({len(diff.shares):,} queues)",
                columns=["queue", "fair share", "allocated"],
                align=["---", "---:", "---:"],
                rows=[
                    f"| {s.kind} `{cell(s.name)}` | {value(s.fair_share_before)} -> "
                    f"{value(s.fair_share_after)} | {value(s.allocated_before)} -> "
                    f"{value(s.allocated_after)} |"
                    for s in diff.shares
                ],
                noun="fair shares",
            )
        )
    if diff.workloads:
        rows = []
        # the disrupted first: a comment cut to its size must still name every eviction
        for w in sorted(diff.workloads, key=lambda w: w.head not in _DISRUPTIVE):
            head = f"**{w.head}**" if w.head in _DISRUPTIVE else w.head
            why = f"{w.reason.code.value}: {cell(w.reason.message)}" if w.reason else ""
            rows.append(f"| `{cell(w.workload)}` | {w.base} | {head} | {why} |")
        disrupted = sum(w.head in _DISRUPTIVE for w in diff.workloads)
        sections.append(
            Section(
                title=f"Workloads the change affects ({len(diff.workloads):,}"
                + (f", {disrupted:,} disrupted" if disrupted else "")
                + ")",
                columns=["workload", "without the change", "with it", "why"],
                rows=rows,
                noun="workloads",
                open=True,
            )
        )
    return sections
