"""Tables that fit the terminal without cutting identifiers.

A name cut to "arts-scie…" cannot be copied into the next command, so names (projects,
departments, workloads, nodes, jobs) are never wrapped or abbreviated. Everything else
gives way instead, in this order: long text (reasons, notes) wraps onto more lines,
multi-word headers wrap, and if the table is still wider than the terminal the columns
worth least are left out (each column says how much it is worth; those marked 0 always
stay). What was left out is said under the table, so a narrow terminal never hides data
silently.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich import box
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

Cell = str | Text
TEXT_MIN_WIDTH = 24


@dataclass(frozen=True)
class Column:
    header: str
    kind: str = "name"  # name: never cut; number: never cut, right-aligned; text: wraps
    drop: int = 0  # 0: always shown; otherwise dropped at narrow widths, lowest first


def fitted(
    console: Console, columns: list[Column], rows: list[list[Cell]], *, title: str | None = None
) -> tuple[Table, list[str]]:
    """The table for ``rows`` at the console's width, and the headers left out."""
    keep = list(range(len(columns)))
    dropped: list[str] = []
    while True:
        table = _table([columns[i] for i in keep], [[r[i] for i in keep] for r in rows], title)
        if _minimum(console, table) <= console.width:
            return table, dropped
        droppable = [i for i in keep if columns[i].drop]
        if not droppable:  # names alone are wider than the terminal: fold them, never crop
            kept = [columns[i] for i in keep]
            return _table(kept, [[r[i] for i in keep] for r in rows], title, fold=True), dropped
        worst = min(droppable, key=lambda i: (columns[i].drop, -i))
        keep.remove(worst)
        dropped.append(columns[worst].header.replace("\n", " "))


UNBOUNDED = 10_000  # columns: a table no wider than it needs, however wide that is


def print_table(
    console: Console,
    columns: list[Column],
    rows: list[list[Cell]],
    *,
    title: str | None = None,
    every_column: bool = False,
) -> None:
    """Print the fitted table and, if columns were left out, which (and how to see them);
    ``every_column``: the whole table, as wide as it needs, whatever the console's width."""
    if every_column:
        # a console of its own (a print's width is bounded by its console's), plain: only
        # asked for where no terminal reads it
        unbounded = Console(file=console.file, width=UNBOUNDED, color_system=None)
        unbounded.print(_table(columns, rows, title))
        return
    table, dropped = fitted(console, columns, rows, title=title)
    console.print(table)
    if dropped:
        console.print(
            Text(
                f"(left out at {console.width} columns: {', '.join(dropped)}; "
                "widen the terminal or use --json)",
                style="dim",
            ),
            highlight=False,
        )


def _table(
    columns: list[Column], rows: list[list[Cell]], title: str | None, *, fold: bool = False
) -> Table:
    table = Table(
        title=title,
        title_justify="left",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,  # two spaces between columns, not three
    )
    for index, c in enumerate(columns):
        fixed = c.kind != "text" and not fold
        widest = max([len(_plain(r[index])) for r in rows] + [len(h) for h in c.header.split("\n")])
        table.add_column(
            c.header,
            justify="right" if c.kind == "number" else "left",
            no_wrap=fixed,
            # text wraps, but into a column wide enough to read (a few words a line)
            min_width=None if fold else widest if fixed else min(widest, TEXT_MIN_WIDTH),
            overflow="fold",
        )
    for r in rows:  # plain text: a name like quota[a100].limit is no markup
        table.add_row(*(Text(c) if isinstance(c, str) else c for c in r))
    return table


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else Text.from_markup(cell).plain


def _minimum(console: Console, table: RenderableType) -> int:
    # measured without the terminal's bound (a measurement is clamped to it)
    return Measurement.get(console, console.options.update_width(10_000), table).minimum
