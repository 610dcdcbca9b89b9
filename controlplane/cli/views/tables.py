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

import re
from collections.abc import Iterable
from dataclasses import dataclass

from rich import box
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.segment import Segment, Segments
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


def print_table(
    console: Console, columns: list[Column], rows: list[list[Cell]], *, title: str | None = None
) -> None:
    """Print the fitted table and, if columns were left out, which (and how to see them)."""
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
    for r in rows:
        table.add_row(*r)
    return table


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else Text.from_markup(cell).plain


def _minimum(console: Console, table: RenderableType) -> int:
    # measured without the terminal's bound (a measurement is clamped to it)
    return Measurement.get(console, console.options.update_width(10_000), table).minimum


def print_entries(console: Console, rows: list[tuple[Text, Text, Text]]) -> None:
    """Two lines per entry, (marker, what) and its (why) below: the marker in a column of
    its own, so that wrapped text stays aligned under the name; names never break (they
    hold no spaces, and fold only if wider than the terminal).

    Laid out here rather than as a rich table: a plan lists thousands of entries, and a
    table measures every cell of every row (5 s for 8,000 entries); this is one wrap per
    entry, each line rendered to segments once, and a single print of them all (one
    text of every line made rich split it again: a third of the time)."""
    if not rows:
        return
    indent = max(m.cell_len for m, _, _ in rows) + 1
    width = max(console.width - indent, TEXT_MIN_WIDTH)
    pad = Segment(" " * indent)
    out: list[Segment] = []
    for n, (marker, what, why) in enumerate(rows):
        if n:
            out.append(Segment.line())
        out += _segments(console, marker)
        out.append(Segment(" " * (indent - marker.cell_len)))
        for i, line in enumerate(_wrapped(console, what, width)):
            if i:
                out += (Segment.line(), pad)
            out += _segments(console, line)
        for line in _wrapped(console, why, width):
            out += (Segment.line(), pad)
            out += _segments(console, line)
    out.append(Segment.line())
    console.print(Segments(out), soft_wrap=True, highlight=False)


def _segments(console: Console, text: Text) -> Iterable[Segment]:
    """One line's segments, its own style included (``Text.render`` applies only spans)."""
    if text.style:
        styled = Text()
        styled.append_text(text)  # the style becomes a span
        text = styled
    return text.render(console)


_WORD = re.compile(r"\S+\s*")


def _wrapped(console: Console, text: Text, width: int) -> list[Text]:
    """``text`` in lines of at most ``width`` cells, broken at spaces (a word wider than
    the line folds). Plain ASCII, the usual case, is split by offsets; anything else goes
    through rich's own wrap, which is exact for wide characters but far slower."""
    plain = text.plain
    if len(plain) <= width and plain.isascii():
        return [text]
    if not plain.isascii() or "\n" in plain:
        return list(text.wrap(console, width, overflow="fold"))
    lines, start, end = [], 0, 0  # the line so far is plain[start:end], spaces included
    for m in _WORD.finditer(plain):
        word_end = m.start() + len(m.group().rstrip())
        if word_end - start > width and end > start:
            lines.append((start, end))
            start = m.start()
        while word_end - start > width:  # a word wider than a line folds
            lines.append((start, start + width))
            start += width
        end = m.end()
    lines.append((start, end))
    out = []
    for a, b in lines:
        line = text[a:b]
        line.rstrip()  # in place
        out.append(line)
    return out
